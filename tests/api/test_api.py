"""The REST API on a SQLite store: what an operator and a script read and change."""

from __future__ import annotations

from fastapi.testclient import TestClient

from fabricops.api.app import create_app
from fabricops.api.context import ApiConfig, ApiContext, FaultRequest
from fabricops.core.actions import ActionState
from fabricops.store.store import Store
from tests.api.conftest import LINK, auth, drain_for, gray_link


def test_health_ready_and_openapi(client: TestClient) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/ready")
    assert ready.status_code == 200
    assert ready.json()["checks"]["store"]["ok"] is True
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/v1/diagnose", "/api/v1/actions/{action_id}/approve", "/api/v1/series",
            "/api/v1/sim/faults", "/metrics"} <= set(paths)


def test_readiness_names_the_part_that_is_down(client: TestClient, ctx: ApiContext) -> None:
    ctx.checks["bus"] = lambda: (False, "broker 127.0.0.1:9092 unreachable")
    answer = client.get("/ready")
    assert answer.status_code == 503
    assert answer.json()["checks"]["bus"] == {"ok": False,
                                              "detail": "broker 127.0.0.1:9092 unreachable"}


def test_topology_and_devices(client: TestClient) -> None:
    topo = client.get("/api/v1/topology").json()
    assert {n["id"] for n in topo["nodes"]} == {"host-000", "host-001", "leaf-0", "spine-0"}
    hosts = client.get("/api/v1/devices", params={"role": "host"}).json()
    assert [d["id"] for d in hosts] == ["host-000", "host-001"]
    leaf = client.get("/api/v1/devices/leaf-0").json()
    assert leaf["neighbours"] == ["host-000", "host-001", "spine-0"]
    eth1 = next(p for p in leaf["ports"] if p["port"] == "leaf-0:eth1")
    assert eth1["peer"] == "host-000:nic0"
    assert eth1["link"] == LINK
    missing = client.get("/api/v1/devices/leaf-9")
    assert missing.status_code == 404
    assert "leaf-9" in missing.json()["detail"]


def test_diagnose_names_the_fault_its_place_and_what_was_done(
        client: TestClient, api_store: Store) -> None:
    d = gray_link()
    api_store.put_diagnoses([d])
    api_store.put_action(drain_for(d))
    report = client.get("/api/v1/diagnose").json()
    assert report["health"] == "fault"
    (incident,) = report["incidents"]
    assert incident["fault_type"] == "gray_loss"
    assert incident["root"] == LINK
    assert incident["neighbours"] == ["host-000", "leaf-0"]
    assert incident["confidence"] == 0.93
    assert incident["affected_jobs"] == ["job-llm-01"]
    assert [e["signal"] for e in incident["evidence"]] == ["fcs_error_ratio"]
    assert incident["alternatives"][0]["entity"] == "leaf-0"
    assert incident["status"] == "proposed"
    assert incident["actions"][0]["id"] == "act-1"
    assert report["summary"].startswith(f"gray_loss at {LINK} since ")


def test_diagnose_is_healthy_when_incidents_cleared_or_healed(
        client: TestClient, api_store: Store) -> None:
    assert client.get("/api/v1/diagnose").json()["health"] == "ok"
    api_store.put_diagnoses([gray_link(ago_s=600, incident="old")])
    assert client.get("/api/v1/diagnose").json()["health"] == "ok"
    d = gray_link(incident="inc-2")
    api_store.put_diagnoses([d])
    api_store.put_action(drain_for(d, ActionState.VERIFIED))
    report = client.get("/api/v1/diagnose").json()
    assert report["health"] == "healing"
    assert report["incidents"][0]["status"] == "healed"


def test_mutations_need_the_token(client: TestClient, api_store: Store) -> None:
    d = gray_link()
    api_store.put_diagnoses([d])
    api_store.put_action(drain_for(d))
    url = "/api/v1/actions/act-1/approve"
    none = client.post(url)
    assert none.status_code == 401
    assert none.headers["www-authenticate"] == "Bearer"
    wrong = client.post(url, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert api_store.action("act-1").state is ActionState.PROPOSED  # type: ignore[union-attr]
    ok = client.post(url, headers=auth(), json={"by": "alice", "note": "CHG-1"})
    assert ok.status_code == 200
    assert ok.json()["state"] == "approved"
    stored = api_store.action("act-1")
    assert stored is not None
    assert stored.audit[-1].actor == "operator:alice"
    assert stored.audit[-1].note == "CHG-1"


def test_decisions_the_state_does_not_allow_are_conflicts(
        client: TestClient, api_store: Store) -> None:
    d = gray_link()
    api_store.put_diagnoses([d])
    api_store.put_action(drain_for(d, ActionState.VERIFIED))
    refused = client.post("/api/v1/actions/act-1/approve", headers=auth())
    assert refused.status_code == 409
    assert "verified" in refused.json()["detail"]
    rollback = client.post("/api/v1/actions/act-1/rollback", headers=auth())
    assert rollback.status_code == 200
    assert rollback.json()["request"] == "rollback"
    again = client.post("/api/v1/actions/act-1/rollback", headers=auth())
    assert again.status_code == 409
    assert "already requested" in again.json()["detail"]
    unknown = client.post("/api/v1/actions/act-zzz/reject", headers=auth())
    assert unknown.status_code == 404


def test_an_api_without_a_token_refuses_every_mutation(
        client: TestClient, ctx: ApiContext) -> None:
    ctx.config = ApiConfig()
    answer = client.post("/api/v1/actions/act-1/approve", headers=auth())
    assert answer.status_code == 403
    assert "without a token" in answer.json()["detail"]
    assert client.post("/api/v1/actions/act-1/approve").status_code == 401


def test_bad_query_parameters_are_problems_naming_each_input(client: TestClient) -> None:
    unknown = client.get("/api/v1/series", params={"entity": "leaf-0:eth1", "metric": "nope"})
    assert unknown.status_code == 422
    assert unknown.headers["content-type"] == "application/problem+json"
    problem = unknown.json()
    assert (problem["type"], problem["title"], problem["status"]) == (
        "about:blank", "Unprocessable Content", 422)
    because = "unknown metric 'nope': not in the catalogue"
    assert problem["detail"] == f"query.metric: {because}"
    assert problem["errors"] == [{"field": "query.metric", "message": because}]
    both = client.get("/api/v1/events", params={"limit": 0, "kind": "melted"}).json()
    assert [e["field"] for e in both["errors"]] == ["query.kind", "query.limit"]
    assert "\n" not in both["detail"]
    assert client.get("/api/v1/actions", params={"state": "melted"}).status_code == 422


def test_an_empty_range_holds_nothing(client: TestClient, api_store: Store) -> None:
    api_store.put_diagnoses([gray_link()])
    inverted = {"start_ns": 10, "end_ns": 5}
    assert client.get("/api/v1/events", params=inverted).json() == []
    assert client.get("/api/v1/diagnoses", params=inverted).json() == []
    series = client.get("/api/v1/series", params={**inverted, "entity": "leaf-0:eth1",
                                                   "metric": "in_octets", "rate": True}).json()
    assert (series["points"], series["rate"]) == ([], True)


def test_a_rate_applies_to_counters_only(client: TestClient) -> None:
    gauge = client.get("/api/v1/series", params={"entity": "leaf-0:eth1",
                                                 "metric": "temperature_c", "rate": True})
    assert gauge.status_code == 200
    assert (gauge.json()["kind"], gauge.json()["rate"]) == ("gauge", False)


def test_errors_outside_routes_and_crashes_are_problems(client: TestClient,
                                                        ctx: ApiContext) -> None:
    missing = client.get("/api/v1/nowhere")
    assert (missing.status_code, missing.json()["detail"]) == (
        404, "GET /api/v1/nowhere: not found")
    assert missing.headers["content-type"] == "application/problem+json"
    wrong = client.delete("/api/v1/devices")
    assert wrong.status_code == 405
    assert wrong.headers["allow"] == "GET"
    assert wrong.json()["title"] == "Method Not Allowed"
    ctx.store = None
    storeless = client.get("/api/v1/diagnose")
    assert storeless.status_code == 503
    assert "keeps no store" in storeless.json()["detail"]


def test_a_crash_is_a_problem_too(ctx: ApiContext) -> None:
    class Broken:
        def inject(self, request: FaultRequest) -> dict[str, object]:
            raise RuntimeError("the twin is gone")

    ctx.injector = Broken()
    client = TestClient(create_app(ctx), raise_server_exceptions=False)
    crashed = client.post("/api/v1/sim/faults", headers=auth(),
                          json={"type": "nic_down", "entity": "host-000:nic0"})
    assert crashed.status_code == 500
    assert crashed.json() == {"type": "about:blank", "title": "Internal Server Error",
                              "status": 500,
                              "detail": "POST /api/v1/sim/faults failed: RuntimeError"}


def test_fault_injection_only_on_a_simulated_fabric(client: TestClient,
                                                    ctx: ApiContext) -> None:
    body = {"type": "gray_loss", "entity": LINK, "params": {"loss_rate": 0.001}}
    assert client.post("/api/v1/sim/faults", json=body).status_code == 401
    answer = client.post("/api/v1/sim/faults", json=body, headers=auth())
    assert answer.status_code == 404
    assert "not running a simulated fabric" in answer.text

    class Recorder:
        def __init__(self) -> None:
            self.got: list[FaultRequest] = []

        def inject(self, request: FaultRequest) -> dict[str, object]:
            if request.entity == "leaf-9":
                raise ValueError("fault #0: entity 'leaf-9' does not exist in the topology")
            self.got.append(request)
            return {"fault_id": 0, "type": request.type.value}

    ctx.injector = recorder = Recorder()
    answer = client.post("/api/v1/sim/faults", json=body, headers=auth())
    assert answer.status_code == 201
    assert answer.json() == {"fault_id": 0, "type": "gray_loss"}
    assert recorder.got[0].params == {"loss_rate": 0.001}
    bad = client.post("/api/v1/sim/faults", headers=auth(),
                      json={"type": "nic_down", "entity": "leaf-9"})
    assert bad.status_code == 422
    assert "does not exist" in bad.json()["detail"]
    assert client.post("/api/v1/sim/faults", headers=auth(),
                       json={"type": "meltdown", "entity": "x"}).status_code == 422
    planted = client.post("/api/v1/sim/faults", headers=auth(),
                          json={"type": "ecn_threshold", "entity": "leaf-0"})
    assert planted.status_code == 201
    assert recorder.got[-1].type.value == "ecn_threshold"


def test_metrics_are_prometheus_text(client: TestClient, ctx: ApiContext) -> None:
    from prometheus_client import Counter
    Counter("fabricops_test_things", "Things", registry=ctx.registry).inc(3)
    answer = client.get("/metrics")
    assert answer.headers["content-type"].startswith("text/plain")
    assert "fabricops_test_things_total 3.0" in answer.text
