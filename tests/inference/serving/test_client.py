"""The stdlib client against a real server on a free loopback port."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from autovalidators.inference import Case  # noqa: E402
from autovalidators.inference.serving.client import Client, ServiceError  # noqa: E402
from autovalidators.inference.serving.loadtest import free_port  # noqa: E402
from autovalidators.inference.serving.config import ServeConfig, ServeLimits  # noqa: E402
from autovalidators.inference.serving.app import create_app, serve_in_thread  # noqa: E402

CASES = [{"id": f"c{i}", "question": "When did the Eiffel Tower open?",
          "context": "The Eiffel Tower opened on 31 March 1889.", "answer": f"It opened in 1889, note {i}."}
         for i in range(5)]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("client")
    config = ServeConfig(models_dir=str(folder / "no-models"), limits=ServeLimits(max_batch_size=2))
    with serve_in_thread(create_app(config)) as url:
        yield url


def test_validate_chunks_to_the_batch_size_and_keeps_order(base_url: str) -> None:
    client = Client(base_url, batch_size=2)  # 5 cases -> 3 requests under the server's limit of 2
    mixed = [Case.model_validate(CASES[0]), *CASES[1:3], {"id": "bad", "answer": "x"}, *CASES[3:]]
    results = client.validate(mixed)
    assert [r["id"] for r in results] == ["c0", "c1", "c2", "bad", "c3", "c4"]
    assert results[3]["error"]["field"] == "question"
    assert all(r["decision"] in {"ACCEPT", "REVIEW", "REJECT"} for i, r in enumerate(results) if i != 3)


def test_batch_over_the_server_limit_raises_413(base_url: str) -> None:
    with pytest.raises(ServiceError) as raised:
        Client(base_url, batch_size=3).validate(CASES)
    assert raised.value.status == 413 and raised.value.code == "batch_too_large"


def test_validate_one_models_and_health(base_url: str) -> None:
    client = Client(base_url)
    assert client.validate_one(CASES[0])["id"] == "c0"
    with pytest.raises(ServiceError) as raised:
        client.validate_one({"id": "x", "question": "q"})
    assert raised.value.status == 422 and "answer" in raised.value.message
    assert {m["name"] for m in client.models()["models"]} == {"fact_spans", "qa_relevance", "tone"}
    assert client.health()["status"] == "ok"


def test_unreachable_server_is_status_0() -> None:
    with pytest.raises(ServiceError) as raised:
        Client(f"http://127.0.0.1:{free_port()}", timeout_s=2).health()
    assert raised.value.status == 0 and raised.value.code == "unreachable"


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Client(batch_size=0)
