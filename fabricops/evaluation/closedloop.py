"""The closed loop on the simulated fabric: fault -> diagnosis -> action -> recovery.

``run_loop`` injects one fault into a busy simulated fabric and runs, tick by
tick: simulator -> in-process bus (telemetry, INT) -> RCA and remediation
watch -> diagnoses -> remediation in the chosen mode -> simulator actuator.
The RCA and remediation see only the bus. The job's throughput (goodput of
its flows) is read from the simulator to score the outcome, against a
reference run of the same fabric without the fault and with the applied
action's steps applied at the same ticks, compared at the same point of the
same collective: what the remaining capacity allows.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabricops.core.actions import Action, ActionState, Param, Step
from fabricops.core.bus import Topic, topic_name
from fabricops.core.busio import BusFrameSink, BusIntSink, frames_from_messages
from fabricops.core.entities import split_port
from fabricops.core.faults import TARGETS, FaultType
from fabricops.core.intreport import IntBatch
from fabricops.core.membus import MemoryBus
from fabricops.core.records import Diagnosis
from fabricops.evaluation.replay import truth_of
from fabricops.evaluation.sim_actuator import SimulatorActuator, direct
from fabricops.rca.engine import RcaEngine
from fabricops.rca.model import RcaModel
from fabricops.remediation.actuator import Actuators, refuse_unreachable
from fabricops.remediation.engine import RemediationConfig, RemediationEngine
from fabricops.remediation.watch import FabricWatch
from fabricops.simulator.agents.int_exporter import IntExporter, IntExporterConfig, ListSender
from fabricops.simulator.engine import Simulator
from fabricops.simulator.scenario import build_simulator, scenario_from_dict

TOPOLOGY: dict[str, Any] = {"builder": "leaf_spine",
                            "params": {"gpus": 128, "leaf_radix": 32, "spine_radix": 32}}
RECOVERED = 0.95
HOLD_TICKS = 3
WARM_UP_TICKS = 10  # the job's first collectives are not compared with the reference


@dataclass
class LoopResult:
    """Times from onset (simulated seconds; None: never) and the throughput outcome."""

    fault: dict[str, Any]
    detect_s: float | None = None
    locate_s: float | None = None
    act_s: float | None = None
    recover_s: float | None = None  # from here to the end the job ran at >= 95 %
    throughput_share: float = 0.0  # last 10 s, against the reference run
    actions: list[Action] = field(default_factory=list)
    applied: list[tuple[int, Step]] = field(default_factory=list)  # (tick, step) on the fabric
    diagnoses: list[Diagnosis] = field(default_factory=list)
    goodput_bps: list[float] = field(default_factory=list)  # job rate per tick (NaN: none)
    relative: list[float] = field(default_factory=list)  # against the reference, same phase
    reference_bps: float = 0.0


def scenario_doc(fault: dict[str, Any] | None, *, seed: int, duration_s: float,
                 spares: int = 4) -> dict[str, Any]:
    """A 128-GPU leaf-spine fabric (16 hosts of 8 NICs) with one communication-heavy job,
    and ``spares`` free hosts."""
    job = {"name": "job-llm-01", "hosts": 16 - spares, "placement": "random",
           "compute_s": 0.0, "comm_bytes_per_nic": 200e9}
    return {"name": f"loop-{seed}", "seed": seed, "duration_s": duration_s, "tick_s": 1.0,
            "topology": TOPOLOGY, "jobs": [job], "faults": [fault] if fault else []}


def run_loop(fault: dict[str, Any] | None, model: RcaModel, config: RemediationConfig, *,
             seed: int = 7, duration_s: float = 45.0,
             diagnosis_filter: Callable[[Diagnosis], Diagnosis] | None = None,
             on_tick: Callable[[RemediationEngine, int], None] | None = None,
             withheld: Collection[str] = ()) -> LoopResult:
    """Run the closed loop once (see the module docstring).

    ``diagnosis_filter`` may rewrite each diagnosis before remediation sees it
    (to test what an action that cannot help does); ``on_tick(engine, now_ns)``
    runs after every tick (a person approving, say). The ``withheld`` devices stop
    reporting when the fault starts, and forward on (an agent or a management
    network gone): their frames never reach the bus, and the actuator refuses
    steps on them, as a device that cannot be reached does.
    """
    scenario = scenario_from_dict(scenario_doc(fault, seed=seed, duration_s=duration_s),
                                  "closed loop")
    sim = build_simulator(scenario)
    topo = sim.fabric.topology
    placement = sim.placement()
    bus = MemoryBus()
    bus.start()
    frames_out, int_out = BusFrameSink(bus), BusIntSink(bus)
    consumer = bus.subscribe([topic_name(Topic.TELEMETRY), topic_name(Topic.INT)], "loop")
    rca = RcaEngine(topo, model, None, placement)
    watch = FabricWatch(topo)
    actuator = LoggedActuator(sim)
    golden = {n.id: dict(sim.settings.device_settings(n.id)) for n in topo.switches()}
    engine = RemediationEngine(config, topo, Actuators.single(actuator), watch, placement,
                               intent=golden)
    exporter = IntExporter(IntExporterConfig(seed=seed, sample_flows_per_tick=64), sim,
                           ListSender())
    out = LoopResult(fault or {})
    onset = float(fault["start_s"]) if fault else None
    truth = truth_of(sim, rca.candidates)
    roots = {rca.candidates.names[i] for r in truth for i in r[0]}
    int_topic = topic_name(Topic.INT)
    meter = JobMeter(sim)
    phases: list[Phase] = []
    for _ in range(scenario.ticks):
        rate, phase = meter.step()
        out.goodput_bps.append(rate)
        phases.append(phase)
        quiet = withheld if onset is not None and sim.time_s > onset else ()
        frames_out.publish_frames([f for f in sim.frames() if f.device not in quiet])
        actuator.unreachable = frozenset(quiet)
        int_out.publish_int(exporter.build_batch(sim))
        while msgs := consumer.poll(0.0, 100_000):
            frames = list(frames_from_messages(m for m in msgs if m.topic != int_topic))
            rca.ingest_frames(frames)
            watch.ingest_frames(frames)
            for m in msgs:
                if m.topic == int_topic:
                    batch = IntBatch.decode(m.value)
                    rca.ingest_int(batch)
                    watch.ingest_int(batch)
        consumer.commit()
        t = sim.tick * scenario.tick_s
        step = rca.step()
        watch.step()
        now = step.ts_ns
        since = None if onset is None else t - onset
        if since is not None and since > 0 and step.symptoms and out.detect_s is None:
            out.detect_s = since
        d = step.diagnosis
        if d is not None:
            out.diagnoses.append(d)
            if since is not None and out.locate_s is None and d.root in roots:
                out.locate_s = since
            if diagnosis_filter is not None:
                d = diagnosis_filter(d)
            engine.on_diagnosis(d, now)
        engine.tick(now)
        if on_tick is not None:
            on_tick(engine, now)
        if out.act_s is None and since is not None and any(
                e.state is ActionState.APPLIED for a in engine.actions.values()
                for e in a.audit):
            out.act_s = since
    bus.stop()
    out.actions = list(engine.actions.values())
    out.applied = [(tick, step) for tick, step, _ in actuator.log]
    ref = reference_by_phase(scenario_doc(None, seed=seed, duration_s=duration_s),
                             actuator.log)
    out.reference_bps = float(np.nanmedian([ref(k) for k in phases])) if phases else 0.0
    out.relative = [_relative(r, k, ref) if i >= WARM_UP_TICKS else float("nan")
                    for i, (r, k) in enumerate(zip(out.goodput_bps, phases, strict=True))]
    _score(out, onset)
    return out


class JobMeter:
    """Steps a simulation and measures one job's collective rate in each tick.

    A collective ends when its slowest flow does, so the job moves at its
    flow count times the goodput of its slowest flow; only flows sending for
    the whole tick count (NaN when none did). ``phase`` is the tick's place in
    its collective as (tick the collective started, ticks since), so a run can
    be compared with a reference at the same point of the same collective.
    A collective starts inside ``sim.step()`` (its bytes are refilled there):
    the tick whose bytes left grew.
    """

    def __init__(self, sim: Simulator, job: int = 0) -> None:
        self.sim = sim
        self.job = job
        self.phase = (0, -1)

    def step(self) -> tuple[float, tuple[int, int]]:
        sim, fl = self.sim, self.sim.workload.flows
        tick = sim.tick
        mine = (fl.job == self.job) & fl.active
        before = mine & (fl.bytes_left > 0)
        left = float(fl.bytes_left[mine].sum())
        obs = sim.step()
        fl = sim.workload.flows
        n = len(before)
        start, since = self.phase
        if float(fl.bytes_left[:n][mine].sum()) > left or since < 0:
            self.phase = (tick, 0)
        else:
            self.phase = (start, since + 1)
        whole = before & (fl.bytes_left[:n] > 0) & fl.active[:n]
        if not whole.any():
            return float("nan"), self.phase
        return float(obs.goodput_bps[:n][whole].min()) * int(mine.sum()), self.phase


class LoggedActuator(SimulatorActuator):
    """The simulator actuator, noting at which tick each step was applied; a step on a
    device in ``unreachable`` fails, as on a device whose management cannot be reached."""

    def __init__(self, sim: Simulator) -> None:
        super().__init__(direct(sim))
        self.sim = sim
        self.log: list[tuple[int, Step, Action]] = []
        self.unreachable: frozenset[str] = frozenset()

    def check(self, step: Step) -> None:
        refuse_unreachable(step, self.unreachable)

    def apply(self, step: Step, action: Action) -> dict[str, Param]:
        refuse_unreachable(step, self.unreachable)
        facts = super().apply(step, action)
        self.log.append((self.sim.tick, step, action))
        return facts


Phase = tuple[int, int]


def reference_by_phase(doc: dict[str, Any], log: list[tuple[int, Step, Action]]
                       ) -> Callable[[Phase], float]:
    """The job's rate on the fault-free fabric with the same steps applied at the same
    ticks, at a given point (collective start tick, ticks since) of a collective.

    A collective that started after the last step is compared with the median over
    the reference's collectives that did (the steady state of what the remaining
    capacity allows); one that started earlier (the one in flight at the fault's
    onset starts at the same tick in both runs) with the reference's collective
    whose start is nearest. Either way a run that fell behind by some ticks is
    compared at its own point of the collective, not at the same tick.
    """
    sim = build_simulator(scenario_from_dict(doc, "reference"))
    act = SimulatorActuator(direct(sim))
    meter = JobMeter(sim)
    last = max((t for t, _, _ in log), default=-1)
    per: dict[int, dict[int, float]] = {}
    for tick in range(int(doc["duration_s"])):
        for _, step, action in (e for e in log if e[0] == tick):
            act.apply(step, action)
        rate, (start, since) = meter.step()
        if np.isfinite(rate):
            per.setdefault(start, {})[since] = rate
    steady: dict[int, list[float]] = {}
    for start, rates in per.items():
        if start > last:
            for k, v in rates.items():
                steady.setdefault(k, []).append(v)
    profile = {k: float(np.median(v)) for k, v in steady.items()}

    def at(phase: Phase) -> float:
        start, since = phase
        if start > last and profile:
            return _at_or_before(profile, since)
        if not per:
            return float("nan")
        nearest = min(per, key=lambda s: (abs(s - start), s))
        return _at_or_before(per[nearest], since)

    return at


def _at_or_before(rates: dict[int, float], since: int) -> float:
    known = [k for k in rates if k <= since]
    return rates[max(known)] if known else float("nan")


def _relative(rate: float, phase: Phase, ref: Callable[[Phase], float]) -> float:
    """``rate`` over the reference at the same point of the collective."""
    base = ref(phase)
    return rate / base if base > 0 else float("nan")


def _score(out: LoopResult, onset: float | None) -> None:
    if onset is None or not out.relative:
        return
    g = np.array(out.relative)
    measured = [i for i in range(int(onset), len(g)) if np.isfinite(g[i])]
    bad = [i for i in measured if g[i] < RECOVERED]
    after = [i for i in measured if not bad or i > bad[-1]]
    if len(after) >= HOLD_TICKS:  # the tick [i, i+1) is over at i+1
        out.recover_s = (bad[-1] + 1 if bad else int(onset)) + 1 - onset
    out.throughput_share = float(np.nanmean(g[-10:]))


_PARAMS: dict[FaultType, dict[str, Any]] = {
    FaultType.GRAY_LOSS: {"loss_rate": 1e-3},
    FaultType.OPTIC_DEGRADATION: {"decay_db_per_s": 0.3, "direction": "a_to_b"},
    FaultType.LINK_FLAP: {"down_s": 1.5, "period_s": 4.0},
    FaultType.SLOW_RECEIVER: {"drain_share": 0.2},
    FaultType.INCAST: {"fan_in": 8, "rate_share": 0.8},
    FaultType.ECN_MISCONFIG: {"mode": "aggressive"},
}


def fault_for(t: FaultType, *, seed: int = 7, start_s: float = 20.0) -> dict[str, Any]:
    """A representative fault of type ``t`` on the loop's fabric, on an entity the job uses."""
    sim = build_simulator(scenario_from_dict(scenario_doc(None, seed=seed, duration_s=1),
                                             "entities"))
    topo = sim.fabric.topology
    host = sim.fabric.node_ids[sim.workload.hosts[0][0]]
    nic = f"{host}:{topo.node_by_id[host].ports[0].name}"
    leaf = split_port(topo.attachment(nic))[0]
    uplink = next(p.name for p in topo.node_by_id[leaf].ports
                  if not topo.port_by_id[topo.peer_of[f"{leaf}:{p.name}"]][0].is_host)
    link = topo.link_of_port(f"{leaf}:{uplink}")
    spine = split_port(topo.peer_of[f"{leaf}:{uplink}"])[0]
    target = {"link": link, "nic": nic, "host_or_nic": nic,
              "switch": leaf if t in (FaultType.HASH_POLARIZATION, FaultType.ECN_MISCONFIG)
              else spine}
    return {"type": t.value, "entity": target[TARGETS[t]], "start_s": start_s,
            "params": _PARAMS.get(t, {})}
