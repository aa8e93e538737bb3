"""What the HTTP service accepts, without FastAPI: body decoding, limits, cases, error bodies.

Kept framework-free so the rules (which breach gets which status, what a bad record looks like)
are tested directly and read in one place; `server.py` only wires them to routes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..case import Case, CaseError, parse_case
from .config import ServeLimits

CASE_FIELDS = ("id", "question", "context", "answer", "meta")


@dataclass
class ApiError(Exception):
    """A request the service refuses: rendered as `{"error": {"code", "message", ...}}`."""

    status: int
    code: str
    message: str
    extra: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


@dataclass(frozen=True)
class ParsedRequest:
    """A decoded `/v1/validate` body: one case, or a batch whose items are cases or errors."""

    batch: bool
    records: list[Case | CaseError]


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON; accepting them would let them leak into scores and meta.
    raise ValueError(f"{name} is not valid JSON")


def decode_json(body: bytes) -> Any:
    """Parses a request body as strict JSON; raises ApiError(400) saying where it broke."""
    if not body.strip():
        raise ApiError(400, "empty_body", "the request body is empty; send a case or {\"cases\": [...]}")
    try:
        text = body.decode("utf-8-sig")  # a leading byte-order mark is ignored, as RFC 8259 allows
    except UnicodeDecodeError as exc:
        raise ApiError(400, "invalid_utf8", f"the body is not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ApiError(400, "invalid_json",
                       f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:
        raise ApiError(400, "invalid_json", str(exc)) from None
    except RecursionError:
        raise ApiError(400, "invalid_json", "JSON nested too deeply") from None


def _has_lone_surrogate(value: Any) -> bool:
    # JSON may escape half of a UTF-16 pair ("\ud800"); such text cannot be tokenised or re-encoded.
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    return False


def to_case(record: Any, *, line: int, source: str, limits: ServeLimits) -> Case | CaseError:
    """One request record as a `Case`, or a `CaseError` naming its position and first bad field."""
    if isinstance(record, dict):
        raw_id = record.get("id")
        case_id = str(raw_id) if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) else None
        for name in CASE_FIELDS:
            if name in record and _has_lone_surrogate(record[name]):
                return CaseError(line, name, "holds an unpaired UTF-16 surrogate; send valid Unicode text",
                                 id=case_id, source=source)
        context = record.get("context")
        passages = [context] if isinstance(context, str) else context if isinstance(context, list) else []
        context_chars = sum(len(p) for p in passages if isinstance(p, str))
        if context_chars > limits.max_context_chars:
            return CaseError(line, "context",
                             f"{context_chars:,} characters is over the limit of {limits.max_context_chars:,}; "
                             "send fewer or shorter passages", id=case_id, source=source)
    return parse_case(record, line=line, source=source, max_text_chars=limits.max_text_chars)


def parse_request(payload: Any, limits: ServeLimits) -> ParsedRequest:
    """Turns a decoded body into cases; a batch keeps going past bad records.

    Raises:
        ApiError: 422 when the body is neither a case nor a batch, 413 when a batch is too long.
    """
    if not isinstance(payload, dict):
        raise ApiError(422, "invalid_body",
                       f"expected a JSON object (a case, or {{\"cases\": [...]}}), got {type(payload).__name__}")
    if "cases" not in payload:
        return ParsedRequest(False, [to_case(payload, line=1, source="body", limits=limits)])
    extra = sorted(k for k in payload if k != "cases")
    if extra:
        raise ApiError(422, "invalid_body", f"a batch has only the key 'cases'; remove {extra}")
    items = payload["cases"]
    if not isinstance(items, list):
        raise ApiError(422, "invalid_body", f"'cases' must be a list of cases, got {type(items).__name__}")
    if len(items) > limits.max_batch_size:
        raise ApiError(413, "batch_too_large",
                       f"{len(items)} cases is over the limit of {limits.max_batch_size} per request; split the batch",
                       {"limit": limits.max_batch_size})
    records = [to_case(item, line=i + 1, source=f"cases[{i}]", limits=limits) for i, item in enumerate(items)]
    return ParsedRequest(True, records)


def case_error_body(error: CaseError) -> dict[str, Any]:
    """The 422 body for a single bad case: the CLI's error record, plus the error code."""
    body = error.to_dict()
    body["error"] = {"code": "invalid_case", **body["error"]}
    return body


def _string(max_length: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length}


def request_schema(limits: ServeLimits) -> dict[str, Any]:
    """The OpenAPI schema of the `/v1/validate` body, with this server's limits in it."""
    case = {
        "title": "Case",
        "type": "object",
        "required": ["id", "question", "answer"],
        "additionalProperties": False,
        "properties": {
            "id": {"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "stable key, echoed back"},
            "question": _string(limits.max_text_chars),
            "context": {
                "description": "one passage, a list of passages, or null when nothing was retrieved",
                "anyOf": [_string(limits.max_context_chars),
                          {"type": "array", "items": _string(limits.max_context_chars)},
                          {"type": "null"}],
            },
            "answer": _string(limits.max_text_chars),
            "meta": {"type": "object", "description": "free-form, not used by the gate"},
        },
    }
    batch = {
        "title": "Batch",
        "type": "object",
        "required": ["cases"],
        "additionalProperties": False,
        "properties": {"cases": {"type": "array", "items": case, "maxItems": limits.max_batch_size}},
    }
    return {"oneOf": [case, batch]}


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "id": {"type": ["string", "null"]},
        "error": {
            "type": "object",
            "required": ["message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}
