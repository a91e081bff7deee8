"""A WSGI face on an ASGI app, so that schemathesis sends its cases in process.

Schemathesis reaches an ASGI app through ``requests`` and counts the pooled
connections of its adapter through urllib3's pool container; with urllib3-future
installed in urllib3's place (grafana-client needs niquests, which needs it) that
container has no ``keys()`` and every call fails. Its WSGI transport goes through
werkzeug's test client instead, for the cases and for the probes its checks send
(``ignored_auth`` replays a call without and with a wrong token). ``WsgiFace``
replays each WSGI request, as the raw path and query it came with, on Starlette's
test client (httpx over ASGI) and hands back the answer unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from fastapi.testclient import TestClient

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class WsgiFace:
    """A WSGI application answering with ``client``'s app."""

    def __init__(self, client: TestClient) -> None:
        self.client = client

    def __call__(self, environ: dict[str, Any], start_response: StartResponse,
                 ) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = [(name[5:].replace("_", "-").lower(), value.encode("latin-1"))
                   for name, value in environ.items() if name.startswith("HTTP_")]
        if environ.get("CONTENT_TYPE"):
            headers.append(("content-type", environ["CONTENT_TYPE"].encode("latin-1")))
        query = environ.get("QUERY_STRING", "")
        url = environ["RAW_URI"] + (f"?{query}" if query else "")
        answer = self.client.request(environ["REQUEST_METHOD"], url, headers=headers,
                                     content=body)
        phrase = HTTPStatus(answer.status_code).phrase
        start_response(f"{answer.status_code} {phrase}", list(answer.headers.multi_items()))
        return [answer.content]
