"""RcaService on the bus: telemetry in, a diagnosis out on diagnoses.v2 and in the store."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import pytest

from fabricops.core.bus import Consumer, Topic, record_headers, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.frame import Frame
from fabricops.core.membus import MemoryBus, MemoryBusConfig, partition_for_key
from fabricops.core.records import Diagnosis
from fabricops.rca.detect import STOPPED
from fabricops.rca.engine import RcaConfig, StepResult
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.rca.service import RcaService, RcaServiceConfig
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import Simulator
from fabricops.simulator.faults import FaultSpec, FaultType
from fabricops.store.store import Store, StoreConfig
from tests.rca.twin import busy_fat_tree

LINK = "agg-0-0:eth1~leaf-0-0:eth3"


def test_a_link_going_down_is_published_and_stored_once_per_revision(tmp_path: Path) -> None:
    sim = busy_fat_tree()
    topo = sim.fabric.topology
    sim.add_fault(FaultSpec(type=FaultType.LINK_DOWN, entity=LINK, start_s=15.0))
    bus = MemoryBus()
    bus.start()
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'f.db'}"))
    store.start()
    service = RcaService(RcaServiceConfig(), bus, topo, RcaModel.load(DEFAULT_MODEL), store)
    sink = BusFrameSink(bus)
    consumer = bus.subscribe([topic_name(Topic.TELEMETRY), topic_name(Topic.INT)], "rca")
    watcher = bus.subscribe([topic_name(Topic.DIAGNOSES)], "test")
    for _ in range(22):
        sim.step()
        sink.publish_frames(sim.frames())
        service.process(consumer.poll(0.0, 10_000))
    records = watcher.poll(0.0, 100)
    published = [Diagnosis.decode(m.value) for m in records]
    assert published, "no diagnosis published"
    assert [m.key for m in records] == [d.root.encode() for d in published], "keyed by root"
    assert {m.headers for m in records} == {record_headers(Topic.DIAGNOSES, "rca")}
    assert all(d.ts_ns > sim.config.start_time_ns + 15e9 for d in published)
    last = published[-1]
    assert (last.root, last.fault_type) == (LINK, "link_down")
    stored = store.diagnoses(t0_ns=0, t1_ns=2**62)
    assert [d.id for d in stored] == [d.id for d in published]
    assert len({d.id for d in published}) == 1, "one incident, revised in place"
    store.stop()
    bus.stop()


def test_a_diagnosis_that_firms_up_is_revised_at_once() -> None:
    """A first guess below remediation's confidence floor that firms up is published
    again when it does, not only at the next republication."""
    bus = MemoryBus()
    bus.start()
    service = RcaService(RcaServiceConfig(republish_s=30.0), bus, fat_tree(k=4), None)
    script = [0.61, 0.97, 0.99, 0.85, 0.97, 0.9]  # one step a second
    published = []
    for i, confidence in enumerate(script):
        ts = (100 + i) * 10**9
        d = Diagnosis(id="inc-1", ts_ns=ts, onset_ns=100 * 10**9, root=LINK, root_kind="link",
                      fault_type="gray_loss", confidence=confidence)
        service.engine.view.newest_ns = ts
        result = SimpleNamespace(diagnoses=(d,), outage_switches=0, context_deferred=0)
        service.engine.step = lambda now, r=result: r  # type: ignore[method-assign]
        published += [p.confidence for p in service.process([])]
    assert published == [0.61, 0.97], "risen by 0.36: revised; by 0.02 or after a dip: not"
    late = Diagnosis(id="inc-1", ts_ns=131 * 10**9, onset_ns=100 * 10**9, root=LINK,
                     root_kind="link", fault_type="gray_loss", confidence=0.9)
    service.engine.view.newest_ns = late.ts_ns
    result = SimpleNamespace(diagnoses=(late,), outage_switches=0, context_deferred=0)
    service.engine.step = lambda now: result  # type: ignore[method-assign]
    assert [p.confidence for p in service.process([])] == [0.9], "republished after 30 s"
    bus.stop()


def _backlog(seconds: int, quiet: Callable[[int, Frame], bool] | None = None
             ) -> tuple[MemoryBus, Simulator, list[int]]:
    """A bus holding ``seconds`` of a 36-device fabric's telemetry (36 frames a
    second, less those ``quiet(second, frame)`` holds back), and each second's
    telemetry time."""
    sim = busy_fat_tree()
    bus = MemoryBus()
    bus.start()
    sink = BusFrameSink(bus)
    times = []
    for second in range(seconds):
        sim.step()
        sink.publish_frames([f for f in sim.frames() if quiet is None or not quiet(second, f)])
        times.append(sim.ts_ns)
    return bus, sim, times


class _Step(NamedTuple):
    now: int  # the telemetry time analysed
    frames: int  # frames folded in by then
    silent: int  # switches that looked silent (their own symptoms, or an outage)


def _drain(service: RcaService, consumer: Consumer, per_poll: int) -> list[_Step]:
    """Feed the service what waits for it a poll at a time, as its consumer loop
    does, then an empty poll; the steps taken."""
    steps: list[_Step] = []
    step = service.engine.step

    def counted(now: int | None = None) -> StepResult:
        assert now is not None, "the service says what time it analyses"
        result = step(now)
        silent = sum(s.rule == STOPPED for s in result.symptoms) + result.outage_switches
        steps.append(_Step(now, service.engine.view.frames_seen, silent))
        return result

    service.engine.step = counted  # type: ignore[method-assign]
    while batch := consumer.poll(0.0, per_poll):
        service.caught_up(consumer.caught_up())
        service.process(batch)
    service.idle()
    service.engine.step = step  # type: ignore[method-assign]
    return steps


def _rca(bus: MemoryBus, sim: Simulator, warmup_steps: int = 0, **config: float
         ) -> tuple[RcaService, Consumer]:
    """The service, polls of 10, and its member; no warm-up unless asked (each step then
    analyses, and its cadence behind the stream is the catch-up's)."""
    service = RcaService(RcaServiceConfig(max_records=10, engine=RcaConfig(
        warmup_steps=warmup_steps), **config), bus, sim.fabric.topology, None)
    return service, bus.subscribe([topic_name(Topic.TELEMETRY), topic_name(Topic.INT)], "rca")


def test_behind_the_stream_it_analyses_less_often_and_says_so(
        caplog: pytest.LogCaptureFixture) -> None:
    """40 s of telemetry waiting (a restart, or more telemetry than the RCA folds
    and analyses in real time): a due step waits for the backlog's end, at most
    ``catch_up_s`` of telemetry, instead of a step for every second of it."""
    bus, sim, times = _backlog(40)
    service, consumer = _rca(bus, sim, catch_up_s=10.0)
    with caplog.at_level(logging.WARNING, logger="fabricops.rca.service"):
        steps = _drain(service, consumer, per_poll=10)
    analysed = [s.now for s in steps]
    assert analysed[-1] == times[-1], "the last step analyses the newest telemetry"
    assert len(steps) <= 40 / 10 + 2, f"{len(steps)} steps while behind"
    assert (np.diff(analysed) <= 11e9).all(), "never more than catch_up_s between steps"
    assert service.m_deferred._value.get() > 0
    assert service.m_unanalysed._value.get() == 0.0, "nothing left unanalysed"
    behind = [r.getMessage() for r in caplog.records if "behind" in r.getMessage()]
    assert len(behind) == 1, "said once, not once a batch"
    assert "at most every 10 s" in behind[0]
    bus.stop()


@pytest.mark.parametrize("catch_up_s", [1.0, 10.0])
def test_behind_a_step_sees_no_switch_of_a_partition_read_later_as_silent(
        catch_up_s: float) -> None:
    """The partitions of a backlog are read unevenly (here one could be 30 s ahead
    of another): a step made while behind analyses the time they have all
    reached, so no switch of a partition read later looks silent."""
    bus, sim, _ = _backlog(40)
    steps = _drain(*_rca(bus, sim, catch_up_s=catch_up_s), per_poll=10)
    assert len(steps) >= 4
    assert [s.silent for s in steps] == [0] * len(steps)
    bus.stop()


def test_with_catch_up_s_of_one_step_it_analyses_each_second_reached() -> None:
    bus, sim, _ = _backlog(40)
    many = _drain(*_rca(bus, sim, catch_up_s=1.0), per_poll=10)
    bus.stop()
    bus, sim, _ = _backlog(40)
    few = _drain(*_rca(bus, sim, catch_up_s=10.0), per_poll=10)
    assert len(many) > 2 * len(few)
    assert (np.diff([s.now for s in many]) >= 1e9).all()
    bus.stop()


def test_a_restart_into_a_backlog_warms_up_on_its_first_seconds() -> None:
    """Warm-up steps only build baselines and cost little: behind the stream they
    still run every ``step_s`` of telemetry, so analysis starts after about
    ``warmup_steps`` seconds of the backlog, not ``warmup_steps`` times
    ``catch_up_s`` (100 s, more than this backlog)."""
    bus, sim, times = _backlog(40)
    service, consumer = _rca(bus, sim, warmup_steps=10, catch_up_s=10.0)
    steps = _drain(service, consumer, per_poll=10)
    analysed = np.array([s.now for s in steps])
    assert len(steps) > 10, f"{len(steps)} steps: the warm-up never ended"
    # every second reached by all partitions (here they advance two by two)
    assert (np.diff(analysed[:10]) <= 2e9).all(), "warm-up steps a second or two apart"
    assert analysed[9] - times[0] <= 20e9, "warmed up on the backlog's first seconds"
    assert (np.diff(analysed[9:]) <= 11e9).all()
    assert len(steps) <= 10 + 40 / 10 + 2, "then at the catch-up's pace"
    assert analysed[-1] == times[-1]
    bus.stop()


def test_on_a_live_stream_a_step_waits_for_the_rest_of_the_tick() -> None:
    """A tick's frames arrive together, in several full polls: the step that the
    first of them makes due runs once the last of them is folded in."""
    bus, sim, _ = _backlog(3)
    service, consumer = _rca(bus, sim)
    _drain(service, consumer, per_poll=10)
    for _ in range(3):
        sim.step()
        BusFrameSink(bus).publish_frames(sim.frames())
        before = service.engine.view.frames_seen
        seen = [s.frames for s in _drain(service, consumer, per_poll=10)]
        assert seen == [before + len(sim.frames())], "one step, after the whole tick"
    bus.stop()


def test_running_it_analyses_a_backlog_that_ends_on_a_full_poll() -> None:
    """Started, the service drains 4 s of telemetry in polls that all come back
    full (36 frames a second, 12 a poll): the step put off runs when a poll
    brings nothing."""
    bus, sim, times = _backlog(4)
    service = RcaService(RcaServiceConfig(max_records=12), bus, sim.fabric.topology, None)
    service.start()
    try:
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and service._last_step_ns != times[-1]:
            time.sleep(0.05)
    finally:
        service.stop()
    assert service._last_step_ns == times[-1], "the newest telemetry was analysed"
    assert service.m_deferred._value.get() > 0, "every poll was full: steps were put off"
    bus.stop()


def test_behind_a_partition_whose_devices_stopped_does_not_hold_the_analysis_back() -> None:
    """The devices of one partition stop after 5 s of a 40 s backlog (their
    collector died): once that partition is read to its end it is not waited
    for, so steps go on every ``catch_up_s`` instead of only at the backlog's
    end (it was less than ``max_skew_s`` behind)."""
    parts = MemoryBusConfig().partitions  # frames are keyed by device
    stopped = partition_for_key(b"leaf-0-0", parts)

    def quiet(second: int, frame: Frame) -> bool:
        return second >= 5 and partition_for_key(frame.device.encode(), parts) == stopped

    bus, sim, times = _backlog(40, quiet)
    steps = _drain(*_rca(bus, sim, catch_up_s=10.0), per_poll=10)
    analysed = [s.now for s in steps]
    assert len(steps) >= 4, f"{len(steps)} steps in 40 s of telemetry"
    assert (np.diff(analysed) <= 11e9).all(), "never more than catch_up_s between steps"
    assert analysed[-1] == times[-1]
    bus.stop()


def test_a_partition_given_up_no_longer_holds_the_analysis_back() -> None:
    """Behind, a step analyses what every partition has reached; after a
    rebalance the partitions the member gave up no longer count."""
    bus, sim, times = _backlog(3)
    service, _ = _rca(bus, sim)
    topic = topic_name(Topic.TELEMETRY)
    service._partition_ts.update({(topic, 0): times[0], (topic, 1): times[2]})
    assert service._watermark(times[2]) == times[0]
    service.assigned({(topic, 1)})
    assert service._watermark(times[2]) == times[2]
    service._partition_ts.update({(topic, 0): times[0]})
    service.caught_up({(topic, 0)})
    assert service._watermark(times[2]) == times[2], "read to its end: not waited for"
    service.caught_up(set())
    assert service._watermark(times[2]) == times[0]
    bus.stop()
