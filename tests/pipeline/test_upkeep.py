"""Store upkeep: a pass merges old spans and deletes what is past the retention, a failed
step is counted and retried, and the thread lives until it is stopped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.core.liveness import Liveness
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.keyframe import decode_block
from fabricops.pipeline.service import PipelineService, PipelineServiceConfig
from fabricops.pipeline.upkeep import WORKER, StoreUpkeep, UpkeepConfig
from fabricops.store.store import Store, StoreConfig, StoreError

from .conftest import UPKEEP_T0, hours_of_frames

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


def _four_hours(tmp_path: Path) -> Store:
    """A store holding a frame every 20 s from T0 to T0 + 4 h (a segment per minute), kept
    2 h."""
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'f.db'}", retention_s=7200))
    store.start()
    hours_of_frames(store, 4)
    return store


def _upkeep(store: Store, clock_ns: int, **config: object) -> StoreUpkeep:
    return StoreUpkeep(UpkeepConfig.model_validate(config), store, CollectorRegistry(),
                       clock_ns=lambda: clock_ns)


@pytest.mark.parametrize(("wall_h", "cutoff_h"), [(10, 2), (3, 1)],
                         ids=["a store of old data keeps its last 2 h", "the wall clock"])
def test_a_pass_merges_old_spans_and_deletes_what_is_past_the_retention(
        tmp_path: Path, wall_h: int, cutoff_h: int) -> None:
    store = _four_hours(tmp_path)
    try:
        before = _points(store)
        assert len(store.segments(t0_ns=0, t1_ns=2**62)) == 241
        upkeep = _upkeep(store, T0 + wall_h * H)
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
        assert merged.segments_in == 180
        assert merged.spans == 18
        assert pruned == 6 * cutoff_h, "the ten-minute segments that ended before it"
        m = upkeep.metrics
        assert m.merged._value.get() == 180
        assert m.pruned._value.get() == pruned
        assert m.last_success._value.get() > 0
        again, pruned_again = upkeep.run_once()
        assert again is not None
        assert (again.spans, pruned_again) == (0, 0), "idempotent"
    finally:
        store.stop()


def test_a_failed_step_is_counted_and_the_other_and_the_next_pass_still_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    store = _four_hours(tmp_path)
    try:
        upkeep = _upkeep(store, T0 + 10 * H)

        def busy() -> dict[tuple[str, str], int]:
            raise StoreError("segment_watermarks on sqlite: database is locked",
                             transient=True)

        with monkeypatch.context() as patch:
            patch.setattr(store, "segment_watermarks", busy)
            merged, pruned = upkeep.run_once()
        assert merged is None
        assert pruned == 120, "the merge failed, the prune went on"
        m = upkeep.metrics
        assert m.errors.labels("merge")._value.get() == 1
        assert m.errors.labels("prune")._value.get() == 0
        assert m.last_success._value.get() == 0, "not a whole pass"
        assert "merge failed" in caplog.text
        assert "database is locked" in caplog.text
        merged, _ = upkeep.run_once()
        assert merged is not None
        assert merged.spans == 6, "the next pass merges"
        assert m.last_success._value.get() > 0
    finally:
        store.stop()


def _wait(condition: object, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.01)
    return False


def test_the_thread_runs_passes_until_stopped(tmp_path: Path) -> None:
    store = _four_hours(tmp_path)
    liveness = Liveness()
    upkeep = StoreUpkeep(UpkeepConfig(interval_s=0.01), store, liveness=liveness,
                         clock_ns=lambda: T0 + 10 * H)
    try:
        upkeep.start()
        assert [(s.name, s.alive) for s in liveness.states()] == [(WORKER, True)]
        assert _wait(lambda: upkeep.metrics.passes._value.get() >= 3)
        assert len(store.segments(t0_ns=0, t1_ns=2**62)) == 6 + 61
    finally:
        upkeep.stop()
        store.stop()
    assert liveness.states() == [], "stopped on purpose: not counted either way"


def test_a_thread_that_ends_by_itself_is_named_dead(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store = _four_hours(tmp_path)
    liveness = Liveness()
    upkeep = StoreUpkeep(UpkeepConfig(interval_s=0.01), store, liveness=liveness)

    def broken() -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(upkeep, "run_once", broken)
    try:
        upkeep.start()
        dead = liveness.wait_for_death(60.0)
        assert [(s.name, s.alive) for s in dead] == [(WORKER, False)]
        assert "RecursionError" in dead[0].reason
    finally:
        upkeep.stop()
        store.stop()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_pipeline_service_keeps_its_store_unless_told_not_to(
        tmp_path: Path, enabled: bool) -> None:
    bus = MemoryBus()
    bus.start()
    liveness = Liveness()
    config = PipelineServiceConfig.model_validate({
        "store": {"url": f"sqlite:///{tmp_path / 'f.db'}"},
        "upkeep": {"enabled": enabled, "interval_s": 0.01}})
    service = PipelineService(config, bus, liveness=liveness)
    service.start()
    try:
        if enabled:
            assert _wait(lambda: service.upkeep.metrics.passes._value.get() >= 1)
        else:
            time.sleep(0.2)
            assert service.upkeep.metrics.passes._value.get() == 0
        assert (WORKER in {s.name for s in liveness.states()}) is enabled
    finally:
        service.stop()
        bus.stop()


def test_merge_spans_must_divide_an_hour() -> None:
    with pytest.raises(ValueError, match="does not divide an hour"):
        UpkeepConfig.model_validate({"spans": {"span_s": 420}})
