"""Writes are idempotent by identity (device, source, ts_ns), never by "newer than
the last one": late frames are kept, re-deliveries are not stored twice."""

from __future__ import annotations

from fabricops.core.bus import DEFAULT_PREFIX, Topic, topic_name
from fabricops.core.frame import Frame
from fabricops.pipeline.keyframe import decode_block
from fabricops.pipeline.worker import PipelineWorker
from fabricops.store.store import Store

from .conftest import Feed, bare_worker, messages, small_sim

S = 10**9
T0 = 1_800_000_000 * S  # a window boundary (60 s windows)
PORTS = ["leaf-9:eth1", "leaf-9:eth2"]


def _frame(t_s: float, seq: int) -> Frame:
    v = int(t_s * 1000)
    return Frame.build("leaf-9", T0 + round(t_s * S), "gnmi", seq, PORTS,
                       ["in_octets", "in_octets"], [v, 2 * v])


def _points(store: Store) -> list[int]:
    """Every stored point's time (s after T0), window by window."""
    out: list[int] = []
    for seg in store.segments(t0_ns=0, t1_ns=2**62):
        out.extend(((block_ts - T0) // S) for block_ts in decode_block(seg.payload).ts_ns.tolist())
    return out


def test_a_late_frame_of_an_open_window_is_kept(store: Store) -> None:
    worker = bare_worker(store)
    first = worker.process(messages(_frame(10, 1), _frame(30, 3)))
    late = worker.process(messages(_frame(20, 2), offset=2))
    assert (first.frames, late.late, late.rejected) == (2, 1, {})
    worker.process(messages(_frame(70, 4), offset=3))  # closes the first window
    assert _points(store) == [10, 20, 30]


def test_a_late_frame_of_a_written_window_corrects_it_once(store: Store) -> None:
    worker = bare_worker(store)
    worker.process(messages(_frame(10, 1), _frame(30, 3), _frame(70, 4)))
    assert _points(store) == [10, 30]
    fixed = worker.process(messages(_frame(20, 2), offset=3))
    assert (fixed.late, fixed.segments, fixed.rejected) == (1, 1, {})
    assert _points(store) == [10, 20, 30]
    block = decode_block(store.segments(t0_ns=0, t1_ns=T0 + 59 * S)[0].payload)
    assert block.raw[:, 1].tolist() == [20_000, 40_000], "the late values, exactly"
    again = worker.process(messages(_frame(20, 2), _frame(10, 1), offset=4))
    assert again.rejected == {"duplicate": 2}
    assert _points(store) == [10, 20, 30]


def test_a_same_time_frame_is_a_duplicate_whatever_its_sequence(store: Store) -> None:
    worker = bare_worker(store)
    worker.process(messages(_frame(10, 1), _frame(20, 2)))
    result = worker.process(messages(_frame(10, 1), _frame(20, 9), offset=2))
    assert result.rejected == {"duplicate": 2}


def test_replaying_a_whole_topic_stores_nothing_twice(store: Store) -> None:
    feed = Feed(small_sim(seed=3), store)
    feed.run(150)
    feed.worker.flush()
    before = [(s.device, s.source, s.t_start_ns, s.payload)
              for s in store.segments(t0_ns=0, t1_ns=2**62)]
    events = store.events(t0_ns=0, t1_ns=2**62, limit=10**6)

    replay = PipelineWorker(feed.config, feed.bus, store)
    replay.restore()
    consumer = feed.bus.subscribe([topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)], "replay")
    duplicates = 0
    while batch := consumer.poll(0.0, 5000):
        duplicates += replay.process(batch).rejected.get("duplicate", 0)
    replay.flush()
    after = [(s.device, s.source, s.t_start_ns, s.payload)
             for s in store.segments(t0_ns=0, t1_ns=2**62)]
    assert after == before
    assert store.events(t0_ns=0, t1_ns=2**62, limit=10**6) == events
    assert duplicates == len(feed.sent)
