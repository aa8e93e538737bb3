"""Shared test fixtures.

`llm_stub`: a local OpenAI-compatible chat server on a free loopback port, for every test of code
that talks to an LLM (the judge, the tone labeller, the pairwise judge). It records each request
and answers from a script of queued responses, then from `default_content` / `responder`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest


@dataclass
class StubResponse:
    status: int = 200
    content: str | None = None  # assistant text wrapped in a chat completion
    body: bytes | None = None  # raw body instead (malformed replies)
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StubRequest:
    path: str
    headers: dict[str, str]
    json: dict[str, Any]


class StubLLMServer:
    """`url` is the base URL (…/v1). `calls` counts the chat requests received.

    Tests script replies with `push(llm_stub.Response(status=500), …)` or `reply("text")`.
    """

    Response = StubResponse

    def __init__(self) -> None:
        self.requests: list[StubRequest] = []
        self.script: deque[StubResponse] = deque()
        self.default_content = '{"ok": true}'
        # Called with the request JSON when the script is empty; returns the assistant text.
        self.responder: Callable[[dict[str, Any]], str] | None = None
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False
        # A short poll interval keeps shutdown (each test's teardown) fast.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.requests)

    def push(self, *responses: StubResponse) -> None:
        with self._lock:
            self.script.extend(responses)

    def reply(self, content: str) -> None:
        self.push(StubResponse(content=content))

    def _next(self, payload: dict[str, Any]) -> StubResponse:
        with self._lock:
            if self.script:
                return self.script.popleft()
        if self.responder is not None:
            return StubResponse(content=self.responder(payload))
        return StubResponse(content=self.default_content)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                try:
                    payload = json.loads(raw)
                except ValueError:
                    payload = {}
                with stub._lock:
                    stub.requests.append(StubRequest(self.path, dict(self.headers.items()), payload))
                if self.path != "/v1/chat/completions":
                    return self._send(StubResponse(status=404, body=b'{"error": "not found"}'))
                return self._send(stub._next(payload))

            def _send(self, response: StubResponse) -> None:
                if response.delay_s:
                    time.sleep(response.delay_s)
                body = response.body
                if body is None:
                    completion = {
                        "id": "stub", "object": "chat.completion", "model": "stub",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": response.content or ""}}],
                    }
                    body = json.dumps(completion).encode() if response.status == 200 else b'{"error": "stub"}'
                try:
                    self.send_response(response.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for name, value in response.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        return Handler

    def start(self) -> "StubLLMServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def llm_stub() -> Iterator[StubLLMServer]:
    """A running stub chat server; see StubLLMServer."""
    server = StubLLMServer().start()
    try:
        yield server
    finally:
        server.stop()
