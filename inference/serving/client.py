"""A small client for `autovalidators serve`, on the standard library only.

    from autovalidators.inference.serving.client import Client
    client = Client("http://127.0.0.1:8080")
    results = client.validate([{"id": "1", "question": "…", "context": "…", "answer": "…"}])
    results[0]["decision"]   # same JSON as the CLI's output lines; a bad record has "error" instead
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Iterable, Mapping

from ..case import Case


class ServiceError(RuntimeError):
    """The server refused a request (or could not be reached); `status` 0 means no answer."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class _Shed(Exception):
    """A 503 with Retry-After: the server did nothing and says when to come back."""

    def __init__(self, error: ServiceError, retry_after_s: float):
        super().__init__(str(error))
        self.error, self.retry_after_s = error, retry_after_s


class Client:
    """Talks to one server. Thread-safe: each call opens its own connection."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080", *, api_key: str | None = None,
                 api_key_header: str = "X-API-Key", timeout_s: float = 30.0, batch_size: int = 64,
                 retries: int = 3, max_retry_wait_s: float = 30.0):
        """
        Args:
            base_url: where the server listens.
            api_key: sent in `api_key_header` when the server requires a key.
            timeout_s: socket timeout per request.
            batch_size: cases per request; keep it at or below the server's `limits.max_batch_size`.
            retries: how often a 503 (the server shedding load, nothing done) is retried after its
                Retry-After; then ServiceError(503) is raised.
            max_retry_wait_s: the longest Retry-After honoured in one wait.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        self.retries, self.max_retry_wait_s = retries, max_retry_wait_s
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.batch_size = batch_size
        self._headers = {"Accept": "application/json"}
        if api_key:
            self._headers[api_key_header] = api_key

    def validate(self, cases: Iterable[Case | Mapping[str, Any]]) -> list[dict[str, Any]]:
        """One result dict per case, in order; a bad record gets `{"id", "error": {...}}` in its place."""
        records = [c.model_dump() if isinstance(c, Case) else dict(c) for c in cases]
        results: list[dict[str, Any]] = []
        for start in range(0, len(records), self.batch_size):
            answer = self._request("POST", "/v1/validate", {"cases": records[start:start + self.batch_size]})
            results.extend(answer["results"])
        return results

    def validate_one(self, case: Case | Mapping[str, Any]) -> dict[str, Any]:
        """The result for one case; a bad case raises ServiceError (422) naming the field."""
        return self._request("POST", "/v1/validate", case.model_dump() if isinstance(case, Case) else dict(case))

    def models(self) -> dict[str, Any]:
        """`{"models": [{name, kind, version, sha256, metrics, ...}], "fallback": [...]}`."""
        return self._request("GET", "/v1/models")

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/healthz")

    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        for attempt in range(self.retries + 1):
            try:
                return self._request_once(method, path, payload)
            except _Shed as shed:
                if attempt == self.retries:
                    raise shed.error from None
                time.sleep(min(shed.retry_after_s, self.max_retry_wait_s))
        raise AssertionError("unreachable")

    def _request_once(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = dict(self._headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                error = json.loads(raw).get("error") or {}
            except (ValueError, AttributeError):
                error = {}
            message = error.get("message") or raw[:200].decode("utf-8", "replace")
            if error.get("field"):  # a bad case: say which field, as the CLI does
                message = f"field '{error['field']}': {message}"
            failure = ServiceError(exc.code, error.get("code", "http_error"), message)
            retry_after = exc.headers.get("Retry-After", "") if exc.headers else ""
            if exc.code == 503 and retry_after.isdigit():
                raise _Shed(failure, float(retry_after)) from None
            raise failure from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServiceError(0, "unreachable", f"{self.base_url}: {reason}") from None
