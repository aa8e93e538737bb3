"""Schemathesis over the server's own OpenAPI spec: valid and invalid requests, never a 5xx."""

from __future__ import annotations

from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402

from autovalidators.inference.serving.config import ServeConfig, ServeLimits  # noqa: E402
from autovalidators.inference.serving.app import create_app, serve_in_thread  # noqa: E402

EXAMPLES_PER_OPERATION = 25  # per generation mode; enough to hit every branch, short enough for CI


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda m: m.value)
def test_fuzzing_the_api_finds_no_server_errors(tmp_path: Path, mode: GenerationMode) -> None:
    # Small limits so generated bodies reach them: every breach must be a 4xx, not a 5xx.
    limits = ServeLimits(max_body_bytes=4_000, max_batch_size=3, max_text_chars=200, max_context_chars=400)
    config = ServeConfig(models_dir=str(tmp_path / "no-models"), limits=limits)
    with serve_in_thread(create_app(config)) as base_url:
        schema = schemathesis.openapi.from_url(base_url + "/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        assert {op.path for op in operations} == {"/v1/validate", "/v1/models", "/healthz", "/metrics"}
        for operation in operations:
            if mode is GenerationMode.NEGATIVE and operation.method.upper() == "GET":
                continue  # the GETs take no input: there is nothing to make invalid

            @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None, derandomize=True,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case) -> None:
                case.call_and_validate(base_url=base_url, checks=[not_a_server_error])

            call()
