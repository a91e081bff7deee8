"""A local HTTP receiver that records every request, for webhook tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.local_http import serve, shut


@dataclass(frozen=True)
class Answer:
    """What the receiver answers to one request."""

    status: int = 200
    body: bytes = b"{}"
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A local HTTP server recording every request; answers are taken from ``script`` in
    order, then ``default``."""

    port: int = 0
    script: list[Answer] = field(default_factory=list)
    default: Answer = field(default_factory=Answer)
    requests: list[Received] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/fabricops"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append(Received(self.path, dict(self.headers), body))
                answer = receiver.script.pop(0) if receiver.script else receiver.default
                time.sleep(answer.delay_s)
                self.send_response(answer.status)
                for name, value in answer.headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                try:
                    self.end_headers()
                    self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting: what a timeout test wants

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = serve(Handler, self.port)
        self.port = int(self._server.server_address[1])

    def stop(self) -> None:
        shut(self._server)
        self._server = None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()
