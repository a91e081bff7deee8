"""RemediationService on the bus and the store: a diagnosis in, an action proposed, stored
and published on actions.v1; approved through the store as the CLI does, applied on the
simulated fabric, verified; a rollback request undoes it."""

from __future__ import annotations

import json
import time
from pathlib import Path

from fabricops.core.actions import Action, ActionMode, ActionState
from fabricops.core.bus import Topic, record_headers, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.membus import MemoryBus
from fabricops.evaluation.sim_actuator import SimulatorActuator, direct
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.rca.service import RcaService, RcaServiceConfig
from fabricops.remediation.actuator import Actuators
from fabricops.remediation.engine import RemediationConfig, RemediationEngine
from fabricops.remediation.service import RemediationService, RemediationServiceConfig
from fabricops.remediation.watch import FabricWatch
from fabricops.remediation.webhook import WebhookClient, WebhookConfig, WebhookNotifier
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec, FaultType
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig
from tests.remediation.http_receiver import Receiver

LINK = "agg-0-0:eth1~leaf-0-0:eth3"


def test_approve_through_the_store_then_roll_back_on_request(tmp_path: Path,
                                                            receiver: Receiver) -> None:
    topo = fat_tree(k=4)
    sim = Simulator(topo, SimConfig(seed=3))
    sim.add_job(JobSpec(hosts=16, placement="random", compute_s=0.3, comm_bytes_per_nic=30e9))
    sim.add_fault(FaultSpec(type=FaultType.GRAY_LOSS, entity=LINK, start_s=15.0,
                            params={"loss_rate": 1e-3}))
    bus = MemoryBus()
    bus.start()
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'f.db'}"))
    store.start()
    rca = RcaService(RcaServiceConfig(), bus, topo, RcaModel.load(DEFAULT_MODEL), store)
    config = RemediationConfig.model_validate(
        {"safety": {"mode": ActionMode.APPROVE, "max_uplink_share": 0.5}})
    engine = RemediationEngine(config, topo, Actuators.single(SimulatorActuator(direct(sim))),
                               FabricWatch(topo))
    notifier = WebhookNotifier(WebhookClient(WebhookConfig(url=receiver.url, secret="k")))
    service = RemediationService(RemediationServiceConfig(), bus, engine, store, notifier)
    sink = BusFrameSink(bus)
    tel = [topic_name(Topic.TELEMETRY), topic_name(Topic.INT)]
    rca_in = bus.subscribe(tel, "rca")
    rem_in = bus.subscribe([*tel, topic_name(Topic.DIAGNOSES)], "remediation")
    published = bus.subscribe([topic_name(Topic.ACTIONS)], "test")

    def tick(n: int) -> None:
        for _ in range(n):
            sim.step()
            sink.publish_frames(sim.frames())
            rca.process(rca_in.poll(0.0, 10_000))
            service.process(rem_in.poll(0.0, 10_000))

    tick(20)
    (proposed,) = store.actions()
    assert proposed.state is ActionState.PROPOSED
    assert proposed.target == LINK
    assert sim.control.wcmp_weight("agg-0-0:eth1") == 1, "nothing applied before approval"
    tick(3)
    assert store.action(proposed.id).state is ActionState.PROPOSED  # type: ignore[union-attr]
    store.transition_action(proposed.id, to=ActionState.APPROVED, actor="operator:bob",
                            ts_ns=time.time_ns())
    tick(8)
    done = store.action(proposed.id)
    assert done is not None
    assert done.state is ActionState.VERIFIED
    assert sim.control.wcmp_weight("agg-0-0:eth1") == 0
    assert sim.control.wcmp_weight("leaf-0-0:eth3") == 0
    store.transition_action(proposed.id, to=None, actor="operator:bob", ts_ns=time.time_ns(),
                            request="rollback")
    tick(2)
    back = store.action(proposed.id)
    assert back is not None
    assert back.state is ActionState.ROLLED_BACK
    assert back.request == ""
    assert sim.control.wcmp_weight("agg-0-0:eth1") == 1
    records = published.poll(0.0, 100)
    actions = [Action.decode(m.value) for m in records]
    assert [m.key for m in records] == [a.id.encode() for a in actions], "keyed by action id"
    assert {m.headers for m in records} == {record_headers(Topic.ACTIONS, "remediation")}
    states = [a.state for a in actions]
    assert states[0] is ActionState.PROPOSED
    assert ActionState.APPLIED in states
    assert states[-1] is ActionState.ROLLED_BACK
    hooked = [json.loads(r.body) for r in receiver.requests]
    assert [h["state"] for h in hooked] == [s.value for s in states], "every move on the webhook"
    assert {r.headers["X-Fabricops-Event"] for r in receiver.requests} == {"remediation.action"}
    actors = [e.actor for e in back.audit]
    assert actors[:2] == ["policy", "operator:bob"]
    assert actors[-1] == "operator"
    store.stop()
    bus.stop()
