"""ChatClient against the loopback stub server (tests/conftest.py `llm_stub`)."""

from __future__ import annotations

import json
import socket
import threading
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from autovalidators.inference.llm_client import (
    ChatClient,
    LLMConnectionError,
    LLMHTTPError,
    LLMOutputError,
    LLMResponseError,
    LLMTimeoutError,
    parse_json_reply,
)

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Say hi."}]
SECRET = "sk-test-do-not-leak-1234567890"


class Score(BaseModel):
    label: Literal["good", "bad"]
    confidence: float = Field(ge=0.0, le=1.0)


def make_client(stub, tmp_path=None, **kwargs) -> ChatClient:
    kwargs.setdefault("timeout_s", 2.0)
    kwargs.setdefault("backoff_s", 0.0)
    return ChatClient(stub.url, "stub-model", cache_dir=tmp_path / "cache" if tmp_path else None, **kwargs)


def test_normal_reply_posts_an_openai_chat_request(llm_stub):
    llm_stub.reply("hi there")
    text = make_client(llm_stub).complete(MESSAGES, max_tokens=5)
    assert text == "hi there"
    request = llm_stub.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.json == {"model": "stub-model", "messages": MESSAGES, "temperature": 0.0, "max_tokens": 5}


def test_api_key_is_sent_as_bearer_and_never_cached_or_shown(llm_stub, tmp_path, monkeypatch):
    monkeypatch.setenv("STUB_KEY", SECRET)
    client = make_client(llm_stub, tmp_path, api_key_env="STUB_KEY")
    client.complete(MESSAGES)
    assert llm_stub.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    cache_files = list((tmp_path / "cache").rglob("*"))
    assert any(f.is_file() for f in cache_files)
    for path in cache_files:
        if path.is_file():
            assert SECRET not in path.read_text(encoding="utf-8")
    assert SECRET not in repr(client)


def test_without_a_key_no_authorization_header_is_sent(llm_stub, monkeypatch):
    monkeypatch.delenv("STUB_KEY_ABSENT", raising=False)
    make_client(llm_stub, api_key_env="STUB_KEY_ABSENT").complete(MESSAGES)
    assert "Authorization" not in llm_stub.requests[0].headers


def test_same_input_is_never_paid_twice(llm_stub, tmp_path):
    llm_stub.default_content = "cached answer"
    first = make_client(llm_stub, tmp_path).chat(MESSAGES)
    # A fresh client on the same folder: the cache is on disk, not in memory.
    second = make_client(llm_stub, tmp_path).chat(MESSAGES)
    assert (first.text, first.cached, second.text, second.cached) == ("cached answer", False, "cached answer", True)
    assert llm_stub.calls == 1
    make_client(llm_stub, tmp_path).chat(MESSAGES, temperature=0.5)  # other params: another request
    make_client(llm_stub, tmp_path).chat(MESSAGES[1:])  # other messages: another request
    assert llm_stub.calls == 3
    assert not list((tmp_path / "cache").rglob("*.tmp")), "temp files must be renamed away"


def test_concurrent_identical_requests_make_one_call(llm_stub, tmp_path):
    llm_stub.push(llm_stub.Response(content="slow", delay_s=0.3))
    client = make_client(llm_stub, tmp_path)
    texts: list[str] = []
    threads = [threading.Thread(target=lambda: texts.append(client.complete(MESSAGES))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert texts == ["slow"] * 4
    assert llm_stub.calls == 1


def test_unreadable_cache_entry_is_refetched(llm_stub, tmp_path):
    client = make_client(llm_stub, tmp_path)
    reply = client.chat(MESSAGES)
    path = tmp_path / "cache" / reply.cache_key[:2] / f"{reply.cache_key}.json"
    path.write_text("{half a record", encoding="utf-8")
    assert client.chat(MESSAGES).cached is False
    assert llm_stub.calls == 2
    assert json.loads(path.read_text(encoding="utf-8"))["text"] == reply.text


def test_retries_5xx_and_429_then_succeeds(llm_stub):
    llm_stub.push(llm_stub.Response(status=500), llm_stub.Response(status=429, headers={"Retry-After": "0"}),
                  llm_stub.Response(content="finally"))
    reply = make_client(llm_stub, max_retries=2).chat(MESSAGES)
    assert (reply.text, reply.attempts, llm_stub.calls) == ("finally", 3, 3)


def test_gives_up_after_max_retries_with_a_typed_error(llm_stub):
    llm_stub.push(*[llm_stub.Response(status=503)] * 3)
    with pytest.raises(LLMHTTPError, match=r"HTTP 503.*\(3 attempts\)") as info:
        make_client(llm_stub, max_retries=2).complete(MESSAGES)
    assert info.value.status == 503
    assert llm_stub.calls == 3


def test_4xx_is_not_retried(llm_stub):
    llm_stub.push(llm_stub.Response(status=401), llm_stub.Response(content="never reached"))
    with pytest.raises(LLMHTTPError) as info:
        make_client(llm_stub, max_retries=3).complete(MESSAGES)
    assert info.value.status == 401
    assert llm_stub.calls == 1


def test_timeout_is_retried_then_raised(llm_stub):
    llm_stub.push(*[llm_stub.Response(content="late", delay_s=0.6)] * 2)
    with pytest.raises(LLMTimeoutError, match=r"timeout after 0.15s.*\(2 attempts\)"):
        make_client(llm_stub, timeout_s=0.15, max_retries=1).complete(MESSAGES)
    assert llm_stub.calls == 2


def test_unreachable_server_is_a_connection_error():
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff_s=0.0, timeout_s=1.0)
    with pytest.raises(LLMConnectionError, match="cannot reach"):
        client.complete(MESSAGES)


@pytest.mark.parametrize("body", [b"not json", b'{"choices": []}', b'{"choices": [{"message": {"content": null}}]}'])
def test_a_reply_that_is_not_a_chat_completion_is_named(llm_stub, body):
    llm_stub.push(llm_stub.Response(body=body))
    with pytest.raises(LLMResponseError, match="chat completion|content of type"):
        make_client(llm_stub).complete(MESSAGES)


def test_complete_json_parses_into_the_schema(llm_stub):
    llm_stub.reply('```json\n{"label": "good", "confidence": 0.9}\n```')
    score = make_client(llm_stub).complete_json(MESSAGES, Score, response_format={"type": "json_object"})
    assert score == Score(label="good", confidence=0.9)
    assert llm_stub.requests[0].json["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Sure! The label is good.", "not JSON"),
        ('["good", 0.9]', "expected an object"),
        ('{"label": "great", "confidence": 0.9}', "label"),
        ('{"label": "good", "confidence": 1.7}', "confidence"),
        ('{"label": "good", "confidence": "0.9"}', "confidence"),  # strings are not coerced to numbers
        ('{"label": "good"}', "confidence"),
    ],
)
def test_unparseable_or_out_of_range_json_is_rejected_not_coerced(text, problem):
    with pytest.raises(LLMOutputError, match=problem) as info:
        parse_json_reply(text, Score)
    assert info.value.text == text


def test_bad_arguments_fail_before_any_request(llm_stub):
    with pytest.raises(ValueError, match="messages"):
        make_client(llm_stub).complete([{"content": "no role"}])
    with pytest.raises(ValueError, match="timeout_s"):
        ChatClient(llm_stub.url, "m", timeout_s=0)
    assert llm_stub.calls == 0
