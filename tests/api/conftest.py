"""An API over a SQLite store of a small fabric, and the records it answers about."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fabricops.api.app import create_app
from fabricops.api.context import ApiConfig, ApiContext
from fabricops.core.actions import Action, ActionKind, ActionMode, ActionState, Step, StepOp
from fabricops.core.records import Diagnosis, Evidence, RankedEntity
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


def drain_for(d: Diagnosis, state: ActionState = ActionState.PROPOSED) -> Action:
    a = Action(id="act-1", diagnosis_id=d.id, created_ns=d.ts_ns, ts_ns=d.ts_ns,
               kind=ActionKind.DRAIN_LINK, target=d.root, fault_type=d.fault_type,
               confidence=d.confidence, mode=ActionMode.APPROVE,
               steps=(Step(op=StepOp.SET_WEIGHT, target="leaf-0:eth1", params={"weight": 0}),),
               reason="gray link").moved(ActionState.PROPOSED, ts_ns=d.ts_ns, actor="policy")
    path = {ActionState.PROPOSED: (), ActionState.APPLIED: (ActionState.APPROVED,
                                                            ActionState.APPLIED),
            ActionState.VERIFIED: (ActionState.APPROVED, ActionState.APPLIED,
                                   ActionState.VERIFIED)}[state]
    for i, s in enumerate(path, start=1):
        a = a.moved(s, ts_ns=d.ts_ns + i, actor="remediation")
    return a
