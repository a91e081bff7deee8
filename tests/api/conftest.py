"""An API over a SQLite store of a small fabric, and the records it answers about:
one incident at a time (``gray_link``, ``drain_for``) or a store as a running
fabricops leaves it (``seed``), and a fault switch that knows the topology."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fabricops.api.app import create_app
from fabricops.api.context import ApiConfig, ApiContext, FaultRequest
from fabricops.core.actions import Action, ActionKind, ActionMode, ActionState, Step, StepOp
from fabricops.core.frame import Frame, Source
from fabricops.core.records import Diagnosis, Event, EventKind, Evidence, RankedEntity, Severity
from fabricops.core.topology import Topology
from fabricops.simulator.builders import leaf_spine
from fabricops.store.store import Store, StoreConfig

TOKEN = "s3cret-token"
LINK = "host-000:nic0~leaf-0:eth1"


@pytest.fixture
def topology() -> Topology:
    return leaf_spine(gpus=16)


@pytest.fixture
def api_store(tmp_path: Path) -> Iterator[Store]:
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'api.db'}"))
    store.start()
    yield store
    store.stop()


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'alerts.db'}"


@pytest.fixture
def ctx(api_store: Store, topology: Topology) -> ApiContext:
    return ApiContext(config=ApiConfig(token=TOKEN), store=api_store, topology=topology)


@pytest.fixture
def client(ctx: ApiContext) -> Iterator[TestClient]:
    with TestClient(create_app(ctx)) as c:
        yield c


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def gray_link(*, ago_s: float = 5.0, onset_ago_s: float = 30.0, incident: str = "inc-1",
              confidence: float = 0.93) -> Diagnosis:
    now = time.time_ns()
    return Diagnosis(
        id=incident, ts_ns=now - int(ago_s * 1e9), onset_ns=now - int(onset_ago_s * 1e9),
        root=LINK, root_kind="link", fault_type="gray_loss", confidence=confidence,
        ranked=(RankedEntity(entity=LINK, kind="link", probability=confidence,
                             fault_type="gray_loss"),
                RankedEntity(entity="leaf-0", kind="switch", probability=0.04,
                             fault_type="ecn_misconfig")),
        evidence=(Evidence(entity="leaf-0:eth1", signal="fcs_error_ratio", value=1e-3,
                           baseline=0.0, note="FCS errors on one direction"),) * 2,
        affected_hosts=("host-000",), affected_jobs=("job-llm-01",),
        action="drain the link from WCMP at both ends")


def drain_for(d: Diagnosis, state: ActionState = ActionState.PROPOSED, *,
              action_id: str = "act-1") -> Action:
    a = Action(id=action_id, diagnosis_id=d.id, created_ns=d.ts_ns, ts_ns=d.ts_ns,
               kind=ActionKind.DRAIN_LINK, target=d.root, fault_type=d.fault_type,
               confidence=d.confidence, mode=ActionMode.APPROVE,
               steps=(Step(op=StepOp.SET_WEIGHT, target="leaf-0:eth1", params={"weight": 0}),),
               reason="gray link").moved(ActionState.PROPOSED, ts_ns=d.ts_ns, actor="policy")
    path = {ActionState.PROPOSED: (), ActionState.APPROVED: (ActionState.APPROVED,),
            ActionState.REJECTED: (ActionState.REJECTED,),
            ActionState.APPLIED: (ActionState.APPROVED, ActionState.APPLIED),
            ActionState.VERIFIED: (ActionState.APPROVED, ActionState.APPLIED,
                                   ActionState.VERIFIED)}[state]
    for i, s in enumerate(path, start=1):
        a = a.moved(s, ts_ns=d.ts_ns + i, actor="remediation")
    return a


#: The actions ``seed`` stores, by id, each in the state its name says.
SEEDED_ACTIONS = {f"act-{state.value}": state for state in (
    ActionState.PROPOSED, ActionState.APPROVED, ActionState.APPLIED, ActionState.VERIFIED,
    ActionState.REJECTED)}


def seed(store: Store) -> None:
    """What a running fabricops leaves in ``store`` about the last minute: two open
    incidents and a cleared one, an action in each state, key events, and a minute of
    one-second frames of leaf-0 (counters, gauges with NaN and infinities, a state)."""
    gray, old = gray_link(), gray_link(ago_s=600, incident="inc-old")
    ecn = gray_link(incident="inc-ecn", confidence=0.71)
    store.put_diagnoses([gray, old, ecn])
    for action_id, state in SEEDED_ACTIONS.items():
        store.put_action(drain_for(gray, state, action_id=action_id))
    now = time.time_ns()
    store.put_events([
        Event(ts_ns=now - k * 5 * 10**9, device="leaf-0", entity="leaf-0:eth1",
              metric=("in_fcs_errors", "oper_status", "temperature_c")[k % 3],
              kind=list(EventKind)[k % 4], value=k * 0.5, severity=list(Severity)[k % 3],
              detail=f"event {k}") for k in range(12)])
    gauges = [41.5, float("nan"), float("inf"), -0.0, 5e-324]
    store.stage_frames([Frame.build(
        "leaf-0", now - (60 - k) * 10**9, Source.GNMI, k, ["leaf-0:eth1"] * 3,
        ["in_octets", "temperature_c", "oper_status"],
        [2**64 - 1 - k if k < 3 else k * 1000, gauges[k % 5], 1]) for k in range(60)])


class TopologyInjector:
    """A FaultInjector that takes any fault on an entity of ``topology`` and refuses
    others as the simulator does (ValueError naming the entity); ``injected`` lists
    what it took."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.injected: list[FaultRequest] = []

    def inject(self, request: FaultRequest) -> Mapping[str, Any]:
        if not self.topology.entity_exists(request.entity):
            raise ValueError(f"fault #{len(self.injected)}: entity {request.entity!r} does "
                             f"not exist in the topology")
        self.injected.append(request)
        return {"fault_id": len(self.injected) - 1, "type": request.type.value,
                "entity": request.entity, "duration_s": request.duration_s,
                "params": dict(request.params)}
