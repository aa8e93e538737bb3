"""LLM labeller against a stub OpenAI-compatible server on loopback: batching, re-asking, caching."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from autovalidators.data_prep.tone.config import LabelSpec, LLMSettings, load_tone_prompt
from autovalidators.data_prep.tone.llm import LLMLabeller

LABELS = {name: LabelSpec(description=f"the {name} label, for tests") for name in ("toxicity", "insult", "politics")}


class Stub:
    """Labels a text toxic+insult when it says "idiot", politics when it says "election"."""

    def __init__(self):
        self.requests: list[dict] = []
        self.garbage_first = False
        self.status = 200

    def reply(self, body: dict) -> tuple[int, dict]:
        self.requests.append(body)
        if self.status != 200:
            return self.status, {"error": "bad request"}
        user = body["messages"][-1]["content"]
        if self.garbage_first and len(self.requests) == 1:
            return 200, _completion("Sure! Here are the labels you wanted.")
        items = []
        for number, text in re.findall(r"^(\d+)\. (\".*\")$", user, flags=re.M):
            text = json.loads(text)
            rude = int("idiot" in text)
            items.append({"id": int(number), "labels": {"toxicity": rude, "insult": rude,
                                                        "politics": int("election" in text)}})
        return 200, _completion("```json\n" + json.dumps({"items": items}) + "\n```")


def _completion(content: str) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": content}}]}


@pytest.fixture()
def stub():
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server API)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, payload = state.reply(body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()
    server.server_close()


def _labeller(stub, tmp_path, **overrides):
    options = {"enabled": True, "base_url": stub.base_url, "model": "stub-model", "max_retries": 0,
               "cache_dir": str(tmp_path / "cache"), "batch_size": 3, **overrides}
    settings = LLMSettings(**options)
    return LLMLabeller(settings, load_tone_prompt(settings.prompt), LABELS)


TEXTS = ["you idiot", "the election is close", "nice weather", "idiot election talk", "thanks a lot"]


def test_labels_batches_and_provenance(stub, tmp_path):
    labeller = _labeller(stub, tmp_path)
    results = labeller.label(TEXTS)
    assert [votes for votes, _ in results] == [
        {"toxicity": 1, "insult": 1, "politics": 0}, {"toxicity": 0, "insult": 0, "politics": 1},
        {"toxicity": 0, "insult": 0, "politics": 0}, {"toxicity": 1, "insult": 1, "politics": 1},
        {"toxicity": 0, "insult": 0, "politics": 0}]
    assert len(stub.requests) == 2  # 5 texts in batches of 3
    assert results[0][1]["toxicity"] == "tone-labeller-v1 (stub-model)"
    system = stub.requests[0]["messages"][0]["content"]
    assert "- insult: the insult label, for tests" in system  # label descriptions reach the model
    assert stub.requests[0]["temperature"] == 0.0


def test_rerun_is_served_from_the_label_cache(stub, tmp_path):
    _labeller(stub, tmp_path).label(TEXTS)
    stub.requests.clear()
    again = _labeller(stub, tmp_path, batch_size=2)  # different batching: the per-text cache still hits
    results = again.label(TEXTS)
    assert stub.requests == [] and again.stats["cached_texts"] == 5
    assert results[0][0]["insult"] == 1


def test_unusable_reply_is_asked_again(stub, tmp_path):
    stub.garbage_first = True
    labeller = _labeller(stub, tmp_path)
    results = labeller.label(TEXTS[:3])
    assert len(stub.requests) == 2 and labeller.stats["bad_replies"] == 1
    assert "Attempt 2" in stub.requests[1]["messages"][-1]["content"]
    assert results[0][0]["toxicity"] == 1


def test_failed_batch_leaves_texts_missing_not_negative(stub, tmp_path):
    stub.status = 400
    labeller = _labeller(stub, tmp_path)
    results = labeller.label(TEXTS[:2])
    assert [votes for votes, _ in results] == [{"toxicity": None, "insult": None, "politics": None}] * 2
    assert labeller.stats["unlabelled_texts"] == 2


def test_long_texts_are_cut_visibly(stub, tmp_path):
    labeller = _labeller(stub, tmp_path, max_text_chars=10)
    user = labeller.messages(["x" * 25])[-1]["content"]
    assert "[... cut, 15 more characters]" in user


def test_pipeline_merges_llm_between_gold_and_lexicon(stub, tmp_path):
    from tone_helpers import write_config, write_sources

    from autovalidators.data_prep.tone.config import load_tone_config
    from autovalidators.data_prep.tone.pipeline import build
    from autovalidators.data_prep.tone.records import read_records

    write_sources(tmp_path / "data")
    llm = {"enabled": True, "base_url": stub.base_url, "model": "stub-model", "max_retries": 0,
           "cache_dir": str(tmp_path / "cache"), "labels": ["toxicity", "insult", "politics"]}
    config = load_tone_config(write_config(tmp_path / "tone.yaml", tmp_path / "data", llm=llm))
    report = build(config, tmp_path / "out")
    assert report["llm"]["labelled_texts"] > 0 and report["llm"]["prompt"] == "tone-labeller-v1"
    records = {r.text: r for p in (tmp_path / "out").glob("*.jsonl") for r in read_records(p)}
    idiot = records["@USER you are a stupid idiot"]
    # Gold (OLID TIN) decides insult; the LLM fills politics, which no source annotates.
    assert idiot.provenance["insult"].labeller == "gold"
    assert idiot.labels["politics"] == 0 and idiot.provenance["politics"].labeller == "llm"
    assert idiot.provenance["politics"].detail == "tone-labeller-v1 (stub-model)"
    # Davidson says nothing about insults: the LLM's vote is used, ahead of any lexicon vote.
    assert records["that bitch is crazy"].provenance["insult"].labeller == "llm"
