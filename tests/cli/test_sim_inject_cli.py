"""``fabricops sim inject``: faults and wrong settings go to the API; a type that is
neither is refused in one line before anything is sent."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

from typer.testing import CliRunner

from fabricops.cli.main import app
from tests.local_http import serve, shut

ENV = {"COLUMNS": "100", "FORCE_COLOR": "", "FABRICOPS_API_TOKEN": "t0k"}


class _Api(BaseHTTPRequestHandler):
    got: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Api.got.append(body)
        answer = json.dumps({"fault_id": 3, "type": body["type"], "start_s": 12.0}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_setting_fault_is_sent_and_an_unknown_type_refused() -> None:
    server = serve(_Api)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        done = CliRunner().invoke(app, ["sim", "inject", "ecn_threshold", "leaf-1",
                                        "--api", url], env=ENV)
        refused = CliRunner().invoke(app, ["sim", "inject", "meltdown", "leaf-1",
                                           "--api", url], env=ENV)
    finally:
        shut(server)
    assert done.exit_code == 0, done.output
    assert "injected ecn_threshold on leaf-1" in done.stdout
    assert _Api.got == [{"type": "ecn_threshold", "entity": "leaf-1", "duration_s": None,
                         "params": {}}]
    assert refused.exit_code == 2
    assert "unknown fault type 'meltdown'" in refused.stderr
    assert "ecn_threshold" in refused.stderr
