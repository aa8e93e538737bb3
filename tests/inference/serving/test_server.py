"""The HTTP service, started for real on a free loopback port: happy paths, every limit, the key."""

from __future__ import annotations

import codecs
import http.client
import json
import time
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from autovalidators.inference import Case, Gate  # noqa: E402
from autovalidators.inference.results import ToneOutput  # noqa: E402
from autovalidators.inference.serving.config import ServeConfig, ServeLimits  # noqa: E402
from autovalidators.inference.serving.app import create_app, serve_in_thread  # noqa: E402
from autovalidators.inference.validators import ValidatorInfo  # noqa: E402

GROUNDED = {"id": "g1", "question": "When did the Eiffel Tower open?",
            "context": "The Eiffel Tower was opened on 31 March 1889 for the World's Fair in Paris.",
            "answer": "The Eiffel Tower opened on 31 March 1889."}
UNSUPPORTED = {"id": "m1", "question": "Will the company open a Mars office?", "context": "",
               "answer": "Yes, the Mars office opens in 2027 with 40 staff."}


class SlowTone:
    """A tone validator that takes `delay_s` per call: makes timeouts and saturation testable."""

    info = ValidatorInfo(name="tone", kind="heuristic", version="slow-test")

    def __init__(self, delay_s: float):
        self.delay_s = delay_s
        self.calls = 0

    def predict(self, cases: Sequence[Case]) -> list[ToneOutput]:
        self.calls += 1
        time.sleep(self.delay_s)
        return [ToneOutput(applies=True, scores={"toxicity": 0.0}, thresholds={"toxicity": 0.5}) for _ in cases]


def _config(tmp_path: Path, **limits: Any) -> ServeConfig:
    # An empty models folder: the heuristics run, whatever trained models the tree holds.
    return ServeConfig(models_dir=str(tmp_path / "no-models"), limits=ServeLimits(**limits))


def _post(base_url: str, body: bytes | Any, headers: dict[str, str] | None = None,
          path: str = "/v1/validate") -> tuple[int, dict[str, Any], dict[str, str]]:
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    connection.request("POST", path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    status, raw, response_headers = response.status, response.read(), dict(response.getheaders())
    connection.close()
    return status, json.loads(raw), response_headers


def _get(base_url: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.request("GET", path, headers=headers or {})
    response = connection.getresponse()
    status, raw = response.status, response.read()
    connection.close()
    return status, json.loads(raw) if raw.startswith((b"{", b"[")) else raw


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    config = _config(tmp_path_factory.mktemp("serve"), max_body_bytes=20_000, max_batch_size=4,
                     max_text_chars=500, max_context_chars=1_000)
    app = create_app(config)
    with serve_in_thread(app) as base_url:
        yield base_url, app.state.gate


def test_health_and_models(server) -> None:
    base_url, gate = server
    status, health = _get(base_url, "/healthz")
    assert status == 200 and health["status"] == "ok"
    assert health["validators"] == list(gate.validators)
    status, models = _get(base_url, "/v1/models")
    assert status == 200
    assert [m["name"] for m in models["models"]] == list(gate.validators)
    assert all(m["kind"] == "heuristic" and m["sha256"] is None for m in models["models"])
    assert models["fallback"] == sorted(gate.validators)


def test_single_case_matches_python_api(server) -> None:
    base_url, gate = server
    status, result, _ = _post(base_url, UNSUPPORTED)
    assert status == 200
    expected = gate.validate(Case.model_validate(UNSUPPORTED)).to_dict()
    for drop in (result, expected):
        drop["meta"].pop("latency_ms")
    assert result == expected
    assert result["decision"] == "REJECT"


def test_batch_keeps_order_and_reports_bad_records(server) -> None:
    base_url, _ = server
    bad = {"id": "no-question", "answer": "text"}
    status, body, _ = _post(base_url, {"cases": [GROUNDED, bad, UNSUPPORTED, 7]})
    assert status == 200
    assert body["errors"] == 2
    results = body["results"]
    assert [r.get("id") for r in results] == ["g1", "no-question", "m1", None]
    assert results[0]["decision"] in {"ACCEPT", "REVIEW", "REJECT"} and results[2]["decision"] == "REJECT"
    assert results[1] == {"id": "no-question", "error": {"line": 2, "field": "question", "message": "is required",
                                                          "source": "cases[1]"}}
    assert results[3]["error"]["source"] == "cases[3]" and "decision" not in results[3]


def test_a_leading_byte_order_mark_is_ignored(server) -> None:
    # RFC 8259 lets a parser ignore one; a client that writes files with it sends it too.
    status, body, _ = _post(server[0], codecs.BOM_UTF8 + json.dumps(GROUNDED).encode("utf-8"))
    assert status == 200 and body["id"] == "g1" and "decision" in body


def test_empty_batch_is_an_empty_answer(server) -> None:
    status, body, _ = _post(server[0], {"cases": []})
    assert (status, body) == (200, {"results": [], "errors": 0})


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        (b"", 400, "empty_body"),
        (b'{"id": "n", "question": "q", "answer": NaN}', 400, "invalid_json"),
        (b"\xff\xfe{}", 400, "invalid_utf8"),
        (b"[" * 50_000, 413, "body_too_large"),
        ([1, 2], 422, "invalid_body"),
        ({"cases": "all of them"}, 422, "invalid_body"),
        ({"cases": [], "extra": 1}, 422, "invalid_body"),
        ({"cases": [GROUNDED] * 5}, 413, "batch_too_large"),
        ({**GROUNDED, "answer": "x" * 501}, 422, "invalid_case"),
        ({**GROUNDED, "context": ["y" * 600, "z" * 600]}, 422, "invalid_case"),
        ({**GROUNDED, "answer": "\ud800 broken"}, 422, "invalid_case"),
        ({**GROUNDED, "confidence": 1}, 422, "invalid_case"),
    ],
    ids=["malformed", "empty", "nan", "not-utf8", "body-too-large", "not-an-object", "cases-not-list",
         "batch-extra-key", "batch-too-large", "answer-too-long", "context-too-long", "lone-surrogate",
         "unknown-field"],
)
def test_each_breach_is_a_clear_4xx(server, body: Any, status: int, code: str) -> None:
    got_status, got, _ = _post(server[0], body)
    assert got_status == status
    assert got["error"]["code"] == code
    assert got["error"]["message"]


def test_over_long_text_in_a_batch_is_one_error_record(server) -> None:
    status, body, _ = _post(server[0], {"cases": [GROUNDED, {**UNSUPPORTED, "answer": "x" * 501}]})
    assert status == 200 and body["errors"] == 1
    assert body["results"][0]["id"] == "g1" and "decision" in body["results"][0]
    assert body["results"][1]["error"]["field"] == "answer"
    assert "over the limit of 500" in body["results"][1]["error"]["message"]


def test_chunked_body_over_the_limit_is_refused(server) -> None:
    parts = urlsplit(server[0])
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    chunks = iter([b'{"cases": [', b'"' + b"a" * 15_000 + b'",', b'"' + b"b" * 15_000 + b'"]}'])
    connection.request("POST", "/v1/validate", body=chunks, encode_chunked=True,
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 413
    assert json.loads(response.read())["error"]["code"] == "body_too_large"
    connection.close()


def test_unknown_route_and_method_are_json(server) -> None:
    status, body = _get(server[0], "/v2/nothing")
    assert status == 404 and body["error"]["code"] == "not_found"
    status, body = _get(server[0], "/v1/validate")
    assert status == 405 and body["error"]["code"] == "method_not_allowed"


def test_openapi_spec_carries_the_limits(server) -> None:
    status, spec = _get(server[0], "/openapi.json")
    assert status == 200
    schema = spec["paths"]["/v1/validate"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    case, batch = schema["oneOf"]
    assert case["properties"]["answer"]["maxLength"] == 500
    assert batch["properties"]["cases"]["maxItems"] == 4
    assert {"/v1/models", "/healthz"} <= set(spec["paths"])
    status, _ = _get(server[0], "/docs")
    assert status == 200


def test_api_key_is_required_when_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_AUTOVALIDATORS_KEY", "s3cret")
    config = _config(tmp_path).model_copy(update={"api_key_env": "TEST_AUTOVALIDATORS_KEY"})
    with serve_in_thread(create_app(config)) as base_url:
        missing = _post(base_url, GROUNDED)
        wrong = _post(base_url, GROUNDED, {"X-API-Key": "guess"})
        right = _post(base_url, GROUNDED, {"X-API-Key": "s3cret"})
        models_without_key = _get(base_url, "/v1/models")
        models_with_key = _get(base_url, "/v1/models", {"X-API-Key": "s3cret"})
        health = _get(base_url, "/healthz")
    assert missing[0] == 401 and missing[1]["error"]["code"] == "unauthorized"
    assert wrong[0] == 401
    assert right[0] == 200 and right[1]["id"] == "g1"
    assert models_without_key[0] == 401 and models_with_key[0] == 200
    assert health[0] == 200  # liveness probes carry no key


def test_named_but_unset_key_refuses_to_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_AUTOVALIDATORS_UNSET", raising=False)
    config = _config(tmp_path).model_copy(update={"api_key_env": "TEST_AUTOVALIDATORS_UNSET"})
    with pytest.raises(ValueError, match="TEST_AUTOVALIDATORS_UNSET"):
        create_app(config)


class BrokenTone(SlowTone):
    def predict(self, cases: Sequence[Case]) -> list[ToneOutput]:
        raise RuntimeError("model exploded")


def test_a_bug_is_a_json_500_and_the_server_keeps_serving(tmp_path: Path) -> None:
    gate = Gate(validators=["tone"], models_dir=tmp_path, instances={"tone": BrokenTone(0)})
    with serve_in_thread(create_app(_config(tmp_path), gate=gate)) as base_url:
        status, body, _ = _post(base_url, GROUNDED)
        health = _get(base_url, "/healthz")
    assert status == 500 and body["error"]["code"] == "internal_error"
    assert "RuntimeError" in body["error"]["message"] and "exploded" not in body["error"]["message"]
    assert health[0] == 200
