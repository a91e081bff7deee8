"""``/ready`` fails while a worker of the process is dead, naming it and its reason; the
API server is itself the worker ``api``."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from fabricops.api.app import create_app
from fabricops.api.context import ApiConfig, ApiContext
from fabricops.api.server import ApiServer
from fabricops.core.liveness import Liveness


def test_ready_lists_each_worker_and_fails_on_a_dead_one(ctx: ApiContext) -> None:
    ctx.liveness = Liveness(ctx.registry)
    ctx.liveness.alive("pipeline")
    ctx.liveness.alive("rca")
    client = TestClient(create_app(ctx))
    answer = client.get("/ready")
    assert answer.status_code == 200
    assert answer.json()["checks"]["worker:rca"] == {"ok": True, "detail": "running"}
    ctx.liveness.dead("rca", "gave up: the bus refused 5 polls")
    answer = client.get("/ready")
    assert answer.status_code == 503
    checks = answer.json()["checks"]
    assert checks["worker:rca"] == {"ok": False, "detail": "gave up: the bus refused 5 polls"}
    assert checks["worker:pipeline"]["ok"] is True
    assert checks["store"]["ok"] is True


def test_the_api_server_is_the_worker_api() -> None:
    liveness = Liveness(CollectorRegistry())
    server = ApiServer(ApiContext(config=ApiConfig(port=0), liveness=liveness))
    server.start()
    try:
        assert [(w.name, w.alive) for w in liveness.states()] == [("api", True)]
        assert server._server is not None
        server._server.should_exit = True
        dead = liveness.wait_for_death(10.0)
        assert [(w.name, w.reason) for w in dead] == [("api",
                                                       "the HTTP server stopped serving")]
    finally:
        server.stop()
    assert liveness.states() == []


def test_stopping_the_api_server_on_purpose_is_no_death() -> None:
    liveness = Liveness(CollectorRegistry())
    server = ApiServer(ApiContext(config=ApiConfig(port=0), liveness=liveness))
    server.start()
    server.stop()
    time.sleep(0.1)
    assert liveness.states() == []
