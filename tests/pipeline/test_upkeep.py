"""Store upkeep: a pass merges old spans and deletes what is past the retention, "now"
resists clocks that jump, a failed step is counted and retried (or, failing for good,
ends the thread loudly), and the thread lives until it is stopped."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.core.frame import Frame
from fabricops.core.liveness import Liveness
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.keyframe import decode_block
from fabricops.pipeline.segment_merge import merge_segments
from fabricops.pipeline.service import PipelineService, PipelineServiceConfig
from fabricops.pipeline.upkeep import (
    WORKER,
    StoreUpkeep,
    UpkeepConfig,
    prune_expired,
)
from fabricops.store.store import Store, StoreConfig, StoreError

from .conftest import UPKEEP_T0, hours_of_frames, messages

S = 10**9
H = 3600 * S
T0 = UPKEEP_T0


def _points(store: Store) -> dict[int, tuple[int, ...]]:
    """Every stored point, by time: the raw values of its series."""
    out: dict[int, tuple[int, ...]] = {}
    for seg in store.segments(t0_ns=0, t1_ns=2**62):
        block = decode_block(seg.payload)
        for j, t in enumerate(block.ts_ns.tolist()):
            out[t] = tuple(block.raw[:, j].tolist())
    return out


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A store holding a frame every 20 s from T0 to T0 + 4 h (a segment per minute), kept
    2 h; stopped after the test."""
    started = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'f.db'}", retention_s=7200))
    started.start()
    hours_of_frames(started, 4)
    yield started
    started.stop()


def _upkeep(store: Store, clock_ns: Callable[[], int], registry: CollectorRegistry,
            **config: object) -> StoreUpkeep:
    return StoreUpkeep(UpkeepConfig.model_validate(config), store, registry,
                       clock_ns=clock_ns)


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    assert value is not None, f"{name} {labels} is not exported"
    return value


def _count(store: Store) -> int:
    return len(store.segments(t0_ns=0, t1_ns=2**62))


@pytest.mark.parametrize(("wall_h", "cutoff_h"), [(10, 2), (3, 1)],
                         ids=["a store of old data keeps its last 2 h", "the wall clock"])
def test_a_pass_merges_old_spans_and_deletes_what_is_past_the_retention(
        store: Store, wall_h: int, cutoff_h: int) -> None:
    before = _points(store)
    assert _count(store) == 241
    reg = CollectorRegistry()
    upkeep = _upkeep(store, lambda: T0 + wall_h * H, reg)
    merged, pruned = upkeep.run_once()
    assert merged is not None
    assert pruned is not None
    segments = store.segments(t0_ns=0, t1_ns=2**62)
    cutoff = T0 + cutoff_h * H
    assert min(s.t_end_ns for s in segments) >= cutoff, "nothing ends before the cutoff"
    assert [s.t_start_ns < T0 + 3 * H for s in segments].count(True) == \
        6 * (3 - cutoff_h), "what ended an hour before the newest data: ten-minute spans"
    assert len(segments) == 6 * (3 - cutoff_h) + 61, "the last hour: one a minute"
    assert _points(store) == {t: v for t, v in before.items() if t >= cutoff}, \
        "every point since the cutoff kept, as it was"
    assert (merged.segments_in, merged.spans) == (120, 12), \
        "looking back the retention (2 h) from the merge's cutoff, not a day"
    assert pruned == 60 + 6 * (cutoff_h - 1), "the first hour's, then ten-minute ones"
    assert _sample(reg, "fabricops_store_upkeep_merged_segments_total") == 120
    assert _sample(reg, "fabricops_store_upkeep_pruned_rows_total") == pruned
    assert _sample(reg, "fabricops_store_upkeep_last_success_timestamp_seconds") > 0
    again, pruned_again = upkeep.run_once()
    assert again is not None
    assert (again.spans, pruned_again) == (0, 0), "idempotent"


def test_one_stream_stamped_far_ahead_does_not_move_now(store: Store) -> None:
    hours_of_frames(store, 0.1, T0 + 8 * 24 * H, device="leaf-1")
    deleted, now = prune_expired(store, T0 + 4 * H)
    assert now == T0 + 4 * H, "the median of the live streams' newest data"
    assert deleted == 120, "what ended 2 h before leaf-9's newest, not a week of it"
    assert {s.device for s in store.segments(t0_ns=0, t1_ns=2**62)} == {"leaf-9", "leaf-1"}


def test_now_is_the_median_of_the_live_streams(store: Store) -> None:
    hours_of_frames(store, 3.5, device="leaf-2")
    hours_of_frames(store, 5, device="leaf-1")
    deleted, now = prune_expired(store, T0 + 30 * 24 * H)
    assert now == T0 + 4 * H, "of 3.5 h, 4 h and 5 h: neither the oldest nor the newest"
    assert deleted == 3 * 120


def test_streams_that_stopped_do_not_hold_pruning_back(store: Store) -> None:
    for device in ("leaf-1", "leaf-2"):  # stopped after 6 minutes, long ago
        hours_of_frames(store, 0.1, device=device)
    deleted, now = prune_expired(store, T0 + 4 * H)
    assert now == T0 + 4 * H, "leaf-9 is the only live stream"
    assert deleted == 120 + 7 + 7, "leaf-9's first two hours, and the stopped streams"
    assert {s.device for s in store.segments(t0_ns=0, t1_ns=2**62)} == {"leaf-9"}


def test_now_advances_at_most_twice_as_fast_as_passes_go(store: Store) -> None:
    clock, mono = [T0 + 4 * H], [0.0]
    upkeep = StoreUpkeep(UpkeepConfig(merge=False), store, clock_ns=lambda: clock[0],
                         monotonic=lambda: mono[0])
    assert upkeep.run_once()[1] == 120
    clock[0] = T0 + 8 * 24 * H  # the clock jumps, and stamps the telemetry too
    hours_of_frames(store, 0.1, clock[0])
    assert upkeep.run_once()[1] == 60, "at once: now moved an hour, not eight days"
    mono[0] = 1800.0
    assert upkeep.run_once()[1] == 61, "half an hour later: two hours more (2 x 30 min + 1 h)"
    assert min(s.t_end_ns for s in store.segments(t0_ns=0, t1_ns=2**62)) > T0 + 4 * H


def test_the_first_prune_advances_from_what_the_store_held_at_start(store: Store) -> None:
    upkeep = StoreUpkeep(UpkeepConfig(interval_s=3600, merge=False), store,
                         clock_ns=lambda: T0 + 8 * 24 * H, monotonic=lambda: 0.0)
    try:
        upkeep.start()  # the clock has jumped; what it stamps is not written yet
        hours_of_frames(store, 0.1, T0 + 8 * 24 * H)
        assert upkeep.run_once()[1] == 180, "an hour past the store's now at start"
    finally:
        upkeep.stop()


def _failing(error: Exception) -> Callable[..., object]:
    def fail(*args: object, **kwargs: object) -> object:
        raise error
    return fail


def test_a_failed_step_is_counted_and_the_other_and_the_next_pass_still_run(
        store: Store, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    reg = CollectorRegistry()
    upkeep = _upkeep(store, lambda: T0 + 10 * H, reg)
    busy = StoreError("segment_heads on sqlite: database is locked", transient=True)
    with monkeypatch.context() as patch:
        patch.setattr(store, "segment_heads", _failing(busy))
        merged, pruned = upkeep.run_once()
    assert merged is None
    assert pruned == 120, "the merge failed, the prune went on"
    assert _sample(reg, "fabricops_store_upkeep_errors_total", step="merge") == 1
    assert _sample(reg, "fabricops_store_upkeep_errors_total", step="prune") == 0
    assert _sample(reg, "fabricops_store_upkeep_last_success_timestamp_seconds") == 0
    assert "merge failed (database busy or away)" in caplog.text
    assert "database is locked" in caplog.text
    broken = StoreError("prune on sqlite: no such table: events", transient=False)
    with monkeypatch.context() as patch:
        patch.setattr(store, "prune", _failing(broken))
        merged, pruned = upkeep.run_once()
    assert merged is not None
    assert merged.spans == 6, "the prune failed, the merge went on"
    assert pruned is None
    assert _sample(reg, "fabricops_store_upkeep_errors_total", step="prune") == 1
    assert "prune failed; trying again" in caplog.text
    assert upkeep.run_once()[1] == 0, "the next pass prunes"
    assert _sample(reg, "fabricops_store_upkeep_last_success_timestamp_seconds") > 0


def _wait(condition: Callable[[], bool], timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_the_thread_runs_passes_until_stopped_through_failed_steps(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    liveness = Liveness()
    reg = CollectorRegistry()
    upkeep = StoreUpkeep(UpkeepConfig(interval_s=0.01), store, reg, liveness=liveness,
                         clock_ns=lambda: T0 + 10 * H)
    busy = StoreError("prune on sqlite: database is locked", transient=True)
    monkeypatch.setattr(store, "prune", _failing(busy))
    try:
        upkeep.start()
        thread = upkeep._thread
        assert [(s.name, s.alive) for s in liveness.states()] == [(WORKER, True)]
        assert _wait(lambda: _sample(reg, "fabricops_store_upkeep_passes_total") >= 5)
        assert _sample(reg, "fabricops_store_upkeep_errors_total", step="prune") >= 5
        assert liveness.dead_workers() == [], "a busy database is waited out"
        assert _count(store) == 60 + 12 + 61, "the merges went on"
        inside = threading.Event()

        def slow(*args: object, **kwargs: object) -> int:
            inside.set()
            time.sleep(0.3)
            return 0

        monkeypatch.setattr(store, "prune", slow)
        assert inside.wait(60.0)
    finally:
        upkeep.stop()
    assert thread is not None
    assert not thread.is_alive(), "stop waits for the step in progress"
    assert liveness.states() == [], "stopped on purpose: not counted either way"


def test_a_step_that_keeps_failing_is_counted_and_never_stops_the_pipeline(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    liveness = Liveness()
    reg = CollectorRegistry()
    upkeep = StoreUpkeep(UpkeepConfig(interval_s=0.01), store, reg, liveness=liveness)
    denied = StoreError("prune on postgresql: permission denied for table events")
    monkeypatch.setattr(store, "prune", _failing(denied))
    try:
        upkeep.start()
        assert _wait(lambda: _sample(reg, "fabricops_store_upkeep_errors_total",
                                     step="prune") >= 10)
        assert [(s.name, s.alive) for s in liveness.states()] == [(WORKER, True)]
        assert _sample(reg, "fabricops_store_upkeep_last_success_timestamp_seconds") == 0, \
            "what the alert reads: no whole pass"
    finally:
        upkeep.stop()


def test_a_thread_that_ends_by_itself_is_named_dead(store: Store,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    liveness = Liveness()
    upkeep = StoreUpkeep(UpkeepConfig(interval_s=0.01), store, liveness=liveness)
    monkeypatch.setattr(upkeep, "run_once", _failing(RecursionError("maximum depth")))
    try:
        upkeep.start()
        dead = liveness.wait_for_death(60.0)
        assert [(s.name, s.alive) for s in dead] == [(WORKER, False)]
        assert "RecursionError" in dead[0].reason
    finally:
        upkeep.stop()


def test_a_merge_asked_to_stop_ends_at_the_next_stream(store: Store) -> None:
    hours_of_frames(store, 2, device="leaf-1")
    assert merge_segments(store, age_ns=H, stop=lambda: True).spans == 0
    asked: list[bool] = []

    def stop() -> bool:
        asked.append(True)
        return len(asked) > 1

    result = merge_segments(store, age_ns=H, stop=stop)
    assert result.spans == 6, "leaf-1 (first by name), then it stopped"
    assert merge_segments(store, age_ns=H).spans == 18, "leaf-9 on the next run"


def test_a_pass_merges_only_the_streams_its_worker_consumes(store: Store) -> None:
    hours_of_frames(store, 4, device="leaf-1")
    upkeep = StoreUpkeep(UpkeepConfig(prune=False), store, clock_ns=lambda: T0 + 4 * H,
                         owned=lambda: {("leaf-1", "gnmi")})
    merged, _ = upkeep.run_once()
    assert merged is not None
    assert merged.spans == 18, "leaf-1's spans that ended an hour before its newest"
    by_device = {d: [s for s in store.segments(t0_ns=0, t1_ns=2**62) if s.device == d]
                 for d in ("leaf-1", "leaf-9")}
    assert (len(by_device["leaf-1"]), len(by_device["leaf-9"])) == (18 + 61, 241)


def test_the_pipeline_service_merges_what_its_worker_consumes(tmp_path: Path) -> None:
    bus = MemoryBus()
    bus.start()
    config = PipelineServiceConfig.model_validate({
        "store": {"url": f"sqlite:///{tmp_path / 'f.db'}"}, "upkeep": {"enabled": False}})
    service = PipelineService(config, bus)
    service.store.start()  # the worker fed by hand, not by its thread
    try:
        assert service.upkeep.owned is not None
        assert service.upkeep.owned() == frozenset()
        now = time.time_ns()
        service.worker.process(messages(*(
            Frame.build(device, now, "gnmi", 1, [f"{device}:eth1"], ["in_octets"], [1])
            for device in ("leaf-2", "leaf-3"))))
        assert service.upkeep.owned() == {("leaf-2", "gnmi"), ("leaf-3", "gnmi")}
    finally:
        service.store.stop()
        bus.stop()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_pipeline_service_keeps_its_store_unless_told_not_to(
        tmp_path: Path, enabled: bool) -> None:
    bus = MemoryBus()
    bus.start()
    liveness = Liveness()
    reg = CollectorRegistry()
    config = PipelineServiceConfig.model_validate({
        "store": {"url": f"sqlite:///{tmp_path / 'f.db'}"},
        "upkeep": {"enabled": enabled, "interval_s": 0.01}})
    service = PipelineService(config, bus, registry=reg, liveness=liveness)
    service.start()
    thread = service.upkeep._thread
    try:
        if enabled:
            assert _wait(lambda: _sample(reg, "fabricops_store_upkeep_passes_total") >= 1)
        else:
            time.sleep(0.2)
            assert _sample(reg, "fabricops_store_upkeep_passes_total") == 0
        assert (WORKER in {s.name for s in liveness.states()}) is enabled
    finally:
        service.stop()
        bus.stop()
    assert (thread is not None) is enabled
    assert thread is None or not thread.is_alive(), "the service's stop ends the upkeep"
    assert WORKER not in {s.name for s in liveness.states()}


def test_merge_spans_must_divide_an_hour() -> None:
    with pytest.raises(ValueError, match="does not divide an hour"):
        UpkeepConfig.model_validate({"spans": {"span_s": 420}})
