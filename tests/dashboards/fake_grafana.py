"""A local stand-in for Grafana's HTTP API: folders and dashboard saves, recorded.

It answers the calls ``fabricops dashboards push`` makes through grafana-client
(``GET/POST /api/folders``, ``POST /api/dashboards/db``) the way Grafana does,
including 401 for a wrong token and 412 for an existing dashboard saved
without ``overwrite``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.local_http import serve, shut

TOKEN = "glsa_test_token"
USER, PASSWORD = "admin", "s3cret"


@dataclass
class FakeGrafana:
    """Folders and dashboards (by uid) as Grafana would hold them, and every request."""

    token: str = TOKEN
    login: tuple[str, str] = (USER, PASSWORD)
    folders: list[dict[str, Any]] = field(default_factory=list)
    dashboards: dict[str, dict[str, Any]] = field(default_factory=dict)
    saves: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    port: int = 0
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answer(self, method: str, path: str, auth: str, body: Any) -> tuple[int, Any]:
        """Status and JSON body for one request."""
        self.requests.append((method, path, auth))
        basic = base64.b64encode(":".join(self.login).encode()).decode()
        if auth not in (f"Bearer {self.token}", f"Basic {basic}"):
            return 401, {"message": "invalid API key"}
        if (method, path) == ("GET", "/api/folders"):
            return 200, self.folders
        if (method, path) == ("POST", "/api/folders"):
            folder = {"id": len(self.folders) + 1, "uid": body.get("uid") or "generated",
                      "title": body["title"]}
            self.folders.append(folder)
            return 200, folder
        if (method, path) == ("POST", "/api/dashboards/db"):
            return self._save(body)
        return 404, {"message": "Not found"}

    def _save(self, body: dict[str, Any]) -> tuple[int, Any]:
        self.saves.append(body)
        model = body["dashboard"]
        uid = model["uid"]
        stored = self.dashboards.get(uid)
        if stored is not None and not body.get("overwrite"):
            return 412, {"message": "A dashboard with the same uid already exists",
                         "status": "name-exists"}
        version = (stored["version"] + 1) if stored else 1
        self.dashboards[uid] = {"model": model, "version": version,
                                "folderUid": body.get("folderUid")}
        return 200, {"id": len(self.dashboards), "uid": uid, "status": "success",
                     "version": version, "url": f"/d/{uid}/{uid}", "slug": uid}

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length)) if length else None
                status, payload = fake.answer(method, self.path.split("?")[0],
                                              self.headers.get("Authorization", ""), body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = serve(Handler, 0)
        self.port = int(self._server.server_address[1])

    def stop(self) -> None:
        shut(self._server)
        self._server = None
