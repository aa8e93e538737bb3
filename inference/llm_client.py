"""A small client for OpenAI-compatible chat APIs, with retries and an on-disk cache.

Used by the optional LLM judge (inference/judge.py), the tone LLM labeller and the pairwise LLM
judge. Standard library only (urllib), so the light runtime stays light: no openai SDK, no httpx.

- `POST {base_url}/chat/completions`; the key comes from the constructor or an environment
  variable, is sent as `Authorization: Bearer …`, and is never logged, cached or shown in `repr`.
- Timeouts, connection failures, HTTP 5xx and 429 are retried with exponential backoff (honouring
  `Retry-After` up to the backoff cap); other 4xx are not, since the same request fails the same way.
- Replies are cached on disk under the sha256 of (base_url, model, messages, params), so the same
  input is never paid for twice. Writes are atomic (temp file + rename) and a per-key lock stops
  two threads of one process from paying for the same request at once. Two processes sharing a
  cache may both pay once; the cache stays consistent either way.
- Errors are typed: `LLMTimeoutError`, `LLMConnectionError`, `LLMHTTPError`, `LLMResponseError`
  (a reply that is not a chat completion), `LLMOutputError` (the assistant's text is not the JSON
  the caller's schema asks for). All derive from `LLMError`.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import re
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, TypeVar

from pydantic import BaseModel, ValidationError

logger = logging.getLogger(__name__)

CACHE_FORMAT = 1
ModelT = TypeVar("ModelT", bound=BaseModel)


class LLMError(RuntimeError):
    """Anything that kept the client from producing an assistant reply the caller can use."""


class LLMTimeoutError(LLMError):
    """The server did not answer within `timeout_s` on every attempt."""


class LLMConnectionError(LLMError):
    """The server could not be reached (refused, reset, DNS) on every attempt."""


class LLMHTTPError(LLMError):
    """The server answered with an HTTP error status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class LLMResponseError(LLMError):
    """The HTTP reply was not a chat completion (bad JSON, no `choices[0].message.content`)."""


class LLMOutputError(LLMError):
    """The assistant's text is not valid JSON for the requested schema; never coerced."""

    def __init__(self, message: str, text: str):
        super().__init__(message)
        self.text = text


@dataclass(frozen=True)
class ChatReply:
    """The assistant text plus how it was obtained (for cost accounting and audit)."""

    text: str
    cached: bool
    attempts: int  # HTTP requests made for this reply; 0 when it came from the cache
    cache_key: str


class ChatClient:
    """OpenAI-compatible chat client: `complete(messages) -> str`, cached and retried."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str | None = None,
        timeout_s: float = 20.0,
        max_retries: int = 2,
        cache_dir: str | Path | None = None,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
    ):
        """
        Args:
            base_url: API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`.
            model: the model name sent with every request (part of the cache key).
            api_key: the key itself; wins over `api_key_env`.
            api_key_env: environment variable holding the key. Without any key no Authorization
                header is sent, which local servers (vLLM, llama.cpp, Ollama) accept.
            timeout_s: per-request socket timeout.
            max_retries: extra attempts after the first on timeouts, connection errors, 5xx, 429.
            cache_dir: folder for cached replies; None turns caching off.
            backoff_s: wait before the first retry; doubled for each further one.
            max_backoff_s: cap on any single wait, `Retry-After` included.
        """
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._api_key = api_key if api_key is not None else (os.environ.get(api_key_env) if api_key_env else None)
        if not self._api_key and api_key_env:
            logger.info("environment variable %s is not set; sending requests without an API key", api_key_env)
        self._locks: dict[str, list[Any]] = {}
        self._locks_guard = threading.Lock()

    def __repr__(self) -> str:
        # The key is deliberately absent: reprs end up in logs and tracebacks.
        return (f"ChatClient(base_url={self.base_url!r}, model={self.model!r}, "
                f"api_key={'set' if self._api_key else 'unset'}, cache_dir={str(self.cache_dir)!r})")

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def cache_key(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        """sha256 of everything that determines the reply; the API key is not part of it."""
        blob = json.dumps(
            {"base_url": self.base_url, "model": self.model, "messages": messages, "params": params},
            sort_keys=True, ensure_ascii=False, separators=(",", ":"),
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float = 0.0,
        response_format: dict[str, Any] | None = None,
        **params: Any,
    ) -> str:
        """The assistant's text for `messages`; from the cache when this exact request was paid for."""
        return self.chat(messages, temperature=temperature, response_format=response_format, **params).text

    def complete_json(
        self,
        messages: list[dict[str, Any]],
        schema: type[ModelT],
        *,
        temperature: float = 0.0,
        response_format: dict[str, Any] | None = None,
        strict: bool = True,
        **params: Any,
    ) -> ModelT:
        """The assistant's JSON reply parsed into `schema`; raises `LLMOutputError` when it is not.

        `response_format={"type": "json_object"}` asks servers that support it for JSON only; it is
        not sent by default because some OpenAI-compatible servers reject the field.
        """
        text = self.complete(messages, temperature=temperature, response_format=response_format, **params)
        return parse_json_reply(text, schema, strict=strict)

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float = 0.0,
        response_format: dict[str, Any] | None = None,
        **params: Any,
    ) -> ChatReply:
        """Like `complete`, but also says whether the reply was cached and how many requests it took."""
        _check_messages(messages)
        request_params: dict[str, Any] = {"temperature": temperature, **params}
        if response_format is not None:
            request_params["response_format"] = response_format
        key = self.cache_key(messages, request_params)
        if self.cache_dir is None:
            text, attempts = self._post({"model": self.model, "messages": messages, **request_params})
            return ChatReply(text, False, attempts, key)
        with self._key_lock(key):
            cached = self._read_cache(key)
            if cached is not None:
                logger.debug("cache hit %s", key[:12])
                return ChatReply(cached, True, 0, key)
            text, attempts = self._post({"model": self.model, "messages": messages, **request_params})
            self._write_cache(key, text)
            return ChatReply(text, False, attempts, key)

    # -- HTTP ---------------------------------------------------------------------------------

    def _post(self, payload: dict[str, Any]) -> tuple[str, int]:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        last_error: LLMError | None = None
        for attempt in range(1, self.max_retries + 2):
            retry_after: float | None = None
            try:
                request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    raw = response.read()
                return _assistant_text(raw, self.endpoint), attempt
            except urllib.error.HTTPError as exc:
                detail = _short(exc.read() if exc.fp else b"")
                error = LLMHTTPError(f"HTTP {exc.code} from {self.endpoint}: {detail}", exc.code)
                if exc.code != 429 and exc.code < 500:
                    raise error from None
                last_error = error
                retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
            except (TimeoutError, socket.timeout):
                last_error = LLMTimeoutError(f"timeout after {self.timeout_s:g}s waiting for {self.endpoint}")
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, (TimeoutError, socket.timeout)):
                    last_error = LLMTimeoutError(f"timeout after {self.timeout_s:g}s connecting to {self.endpoint}")
                else:
                    last_error = LLMConnectionError(f"cannot reach {self.endpoint}: {exc.reason}")
            except (ConnectionError, http.client.HTTPException) as exc:
                last_error = LLMConnectionError(f"connection to {self.endpoint} failed: {exc!r}")
            if attempt <= self.max_retries:
                wait = min(self.max_backoff_s, retry_after if retry_after is not None
                           else self.backoff_s * 2 ** (attempt - 1))
                logger.warning("LLM request failed (%s); retry %d/%d in %.2fs",
                               last_error, attempt, self.max_retries, wait)
                time.sleep(wait)
        assert last_error is not None  # the loop runs at least once and only falls through on errors
        attempts = self.max_retries + 1
        raise type(last_error)(*_with_attempts(last_error, attempts)) from None

    # -- cache --------------------------------------------------------------------------------

    def _cache_path(self, key: str) -> Path:
        assert self.cache_dir is not None
        return self.cache_dir / key[:2] / f"{key}.json"

    def _read_cache(self, key: str) -> str | None:
        path = self._cache_path(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable cache entry %s (%s); it will be refetched", path, exc)
            return None
        if not isinstance(record, dict) or record.get("format") != CACHE_FORMAT or not isinstance(record.get("text"), str):
            logger.warning("ignoring cache entry %s in an unknown format; it will be refetched", path)
            return None
        return record["text"]

    def _write_cache(self, key: str, text: str) -> None:
        path = self._cache_path(key)
        # Only what is needed to replay the reply: never the key, never the request headers.
        record = {"format": CACHE_FORMAT, "model": self.model, "base_url": self.base_url,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "text": text}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # A unique temp file in the same folder, then an atomic rename: readers see either no
            # entry or a whole one, and concurrent writers of the same key cannot interleave.
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:12]}.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(record, handle, ensure_ascii=False)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            # The reply is still good; losing the cache entry only costs money on a rerun.
            logger.warning("could not write cache entry %s: %s", path, exc)

    @contextmanager
    def _key_lock(self, key: str) -> Iterator[None]:
        """One in-flight request per cache key in this process; the lock is dropped when unused."""
        with self._locks_guard:
            entry = self._locks.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._locks_guard:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._locks[key]


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)


def parse_json_reply(text: str, schema: type[ModelT], *, strict: bool = True) -> ModelT:
    """Parses an assistant reply into `schema`, or raises `LLMOutputError` saying what was wrong.

    A reply wrapped in one markdown code fence is unwrapped (a formatting habit, not a change of
    content); anything else that is not a JSON object valid for the schema is rejected. With
    `strict`, types are not coerced either ("0.9" is not a number).
    """
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise LLMOutputError(f"reply is not JSON ({exc.msg} at char {exc.pos}): {_short(text)}", text) from None
    if not isinstance(data, dict):
        raise LLMOutputError(f"reply is JSON {type(data).__name__}, expected an object: {_short(text)}", text)
    try:
        return schema.model_validate(data, strict=strict)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()
        )
        raise LLMOutputError(f"reply does not match {schema.__name__}: {problems}", text) from None


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) or "content" not in message:
            raise ValueError(f"messages[{index}] must be a dict with a string 'role' and a 'content'")


def _assistant_text(raw: bytes, endpoint: str) -> str:
    try:
        data = json.loads(raw)
        content = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise LLMResponseError(
            f"{endpoint} did not return a chat completion with choices[0].message.content: {_short(raw)}"
        ) from None
    if not isinstance(content, str):
        raise LLMResponseError(f"{endpoint} returned choices[0].message.content of type {type(content).__name__}")
    return content


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date; the exponential backoff is a fine stand-in


def _with_attempts(error: LLMError, attempts: int) -> tuple[Any, ...]:
    message = f"{error} ({attempts} attempt{'s' if attempts != 1 else ''})"
    return (message, error.status) if isinstance(error, LLMHTTPError) else (message,)


def _short(value: bytes | str, limit: int = 200) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
