"""Windows held in memory until written: what the bus must keep (holds), a failed batch
forgotten without losing the ones before it, a stream judged quiet that sends more,
sources gone silent, and window writes spread over batches, a few windows
encoded together."""

from __future__ import annotations

import threading

import pytest

from fabricops.core.bus import Message, Topic, topic_name
from fabricops.core.frame import Frame
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.keyframe import decode_block
from fabricops.pipeline.segment_merge import MergeConfig, merge_segments
from fabricops.pipeline.windows import WindowBook
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.store.store import Store, StoreError

T0 = 1_800_000_000 * 10**9  # on a 10 s window boundary
S = 10**9
TOPIC = topic_name(Topic.TELEMETRY)


def _frame(device: str, second: int) -> Frame:
    return Frame.build(device, T0 + second * S, "gnmi", second, [f"{device}:eth1"],
                       ["in_octets"], [1000 * second])


def _msgs(device: str, *seconds: int, partition: int = 0) -> list[Message]:
    return [Message(TOPIC, partition, 100 * partition + s, device.encode(),
                    _frame(device, s).encode(), 0) for s in seconds]


def _worker(store: Store, **config: object) -> PipelineWorker:
    settings = {"max_future_s": 1e9, "keyframe_interval_s": 10, **config}
    return PipelineWorker(PipelineConfig.model_validate(settings), MemoryBus(), store)


def _down(*_: object) -> object:
    raise StoreError("database restarting", transient=True)


def _worker_whose_write_failed(store: Store, monkeypatch: pytest.MonkeyPatch) -> PipelineWorker:
    """A worker holding leaf-1 at 1, 2, 3 whose next batch (4, and 11, which completes
    the window) failed writing the window: the database is away."""
    worker = _worker(store)
    worker.process(_msgs("leaf-1", 1, 2, 3))
    monkeypatch.setattr(store, "close_windows", _down)
    with pytest.raises(StoreError):
        worker.process(_msgs("leaf-1", 4, 11))
    return worker


def _stored(store: Store, device: str) -> list[int]:
    return sorted((t - T0) // S for seg in store.segments(t0_ns=0, t1_ns=2**62, devices=[device])
                  for t in decode_block(seg.payload).ts_ns.tolist())


def test_a_window_reopened_before_it_is_written_keeps_every_frame() -> None:
    book = WindowBook(10 * S)
    first = book.start(("leaf-1", "gnmi"), 0)
    first.add(_frame("leaf-1", 1), (1, (TOPIC, 0), 7))
    book.finish(("leaf-1", "gnmi"))
    again = book.start(("leaf-1", "gnmi"), 0)
    again.add(_frame("leaf-1", 2), (2, (TOPIC, 0), 9))
    assert again is first
    assert [f.seq for f in again.frames] == [1, 2]
    assert book.holds() == {(TOPIC, 0): 7}


def test_holds_name_the_oldest_unwritten_frame_of_each_partition(store: Store) -> None:
    worker = _worker(store)
    worker.process(_msgs("leaf-1", 1, 2, partition=0) + _msgs("leaf-2", 3, partition=1))
    assert worker.windows.holds() == {(TOPIC, 0): 1, (TOPIC, 1): 103}
    worker.process(_msgs("leaf-1", 11, partition=0))  # leaf-1's first window is written
    assert _stored(store, "leaf-1") == [1, 2]
    assert worker.windows.holds() == {(TOPIC, 0): 11, (TOPIC, 1): 103}
    worker.flush()
    assert worker.windows.holds() == {}


def test_a_failed_batch_is_forgotten_and_the_batches_before_it_are_kept(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    worker = _worker_whose_write_failed(store, monkeypatch)
    worker.recover()
    assert [f.seq for f in worker.windows.frames()] == [1, 2, 3], "batch 2 is forgotten"
    monkeypatch.undo()
    worker.process(_msgs("leaf-1", 4, 11))  # the consumer loop hands the batch again
    assert _stored(store, "leaf-1") == [1, 2, 3, 4]
    assert worker.metrics.rejected.labels("duplicate")._value.get() == 0


def test_a_stream_judged_quiet_that_sends_more_of_its_window_loses_nothing(
        store: Store) -> None:
    # a window a group, one group a batch
    worker = _worker(store, close_grace_s=0, close_budget_s=1e-9, encode_group_samples=1)
    worker.process(_msgs("leaf-1", 1, 2) + _msgs("leaf-2", 1, 2))
    worker.process(_msgs("leaf-3", 12))  # leaf-1 and leaf-2 judged quiet: one is written
    assert len(worker.windows.complete) == 1
    [(key, _)] = worker.windows.complete
    late = key[0]
    worker.process(_msgs(late, 3, 4))  # more of the window that waits
    worker.flush()
    assert _stored(store, late) == [1, 2, 3, 4]


def test_a_source_gone_silent_has_its_open_windows_written_when_idle(store: Store) -> None:
    worker = _worker(store, idle_close_s=1)
    worker.process(_msgs("leaf-1", 1, 2))
    worker.idle()
    assert _stored(store, "leaf-1") == [], "not silent for long yet"
    threading.Event().wait(1.1)
    worker.idle()
    assert _stored(store, "leaf-1") == [1, 2]
    assert worker.windows.holds() == {}


def test_windows_completing_together_are_written_over_several_batches(store: Store) -> None:
    devices = [f"leaf-{i}" for i in range(6)]
    worker = _worker(store, close_budget_s=1e-9, encode_group_samples=1)  # a window a group
    worker.process([m for d in devices for m in _msgs(d, 1, 2)])
    writes = []
    for second in (11, 12, 13):
        result = worker.process([m for d in devices for m in _msgs(d, second)])
        writes.append(result.segments)
    assert writes == [1, 1, 1], "at least one, and within the budget, per batch"
    assert len(worker.windows.complete) == 3
    assert worker.metrics.windows.labels("complete")._value.get() == 3
    worker.flush()
    assert all(_stored(store, d) == [1, 2, 11, 12, 13] for d in devices)


def test_a_recovery_that_cannot_read_the_store_changes_nothing(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    worker = _worker_whose_write_failed(store, monkeypatch)
    monkeypatch.setattr(store, "stream_checkpoints", _down)
    for _ in range(3):  # the consumer loop tries again while the database is away
        with pytest.raises(StoreError):
            worker.recover()
        assert [f.seq for f in worker.windows.frames()] == [1, 2, 3, 4, 11]
    monkeypatch.undo()
    worker.recover()
    assert [f.seq for f in worker.windows.frames()] == [1, 2, 3], "the failed batch is gone"
    worker.process(_msgs("leaf-1", 4, 11))
    worker.flush()
    assert _stored(store, "leaf-1") == [1, 2, 3, 4, 11]


def test_small_windows_are_encoded_together_up_to_a_group(store: Store) -> None:
    """Within one batch's budget the writer takes a whole group: windows are encoded
    together until they hold ``encode_group_samples`` samples."""
    devices = [f"leaf-{i}" for i in range(6)]
    # a frame here is one sample: two windows of two frames fill a group
    worker = _worker(store, close_budget_s=1e-9, encode_group_samples=4)
    worker.process([m for d in devices for m in _msgs(d, 1, 2)])
    writes = [worker.process([m for d in devices for m in _msgs(d, s)]).segments
              for s in (11, 12)]
    assert writes == [2, 2]
    worker.flush()
    assert all(_stored(store, d) == [1, 2, 11, 12] for d in devices)


def test_a_window_with_nothing_to_write_between_two_of_its_group_keeps_them_apart(
        store: Store) -> None:
    """leaf-1's window is all in a merged segment already: of the three windows encoded
    together, the other two replace their stored segments, and leaf-1 gets no second
    copy."""
    first = _worker(store)
    first.process(_msgs("leaf-1", 1, 2, 11, 12, 21) + _msgs("leaf-0", 1) + _msgs("leaf-2", 1))
    first.flush()
    assert merge_segments(store, config=MergeConfig(span_s=20)).spans == 1
    spans = [(g.t_start_ns, g.t_end_ns) for g in
             store.segments(t0_ns=0, t1_ns=2**62, devices=["leaf-1"])]
    assert sorted(spans) == [(T0 + S, T0 + 12 * S), (T0 + 21 * S, T0 + 21 * S)]
    again = _worker(store, close_budget_s=1e-9)
    again.process([m for d in ("leaf-0", "leaf-1", "leaf-2") for m in _msgs(d, 1, 2)])
    assert again.process([m for d in ("leaf-0", "leaf-1", "leaf-2")
                          for m in _msgs(d, 11)]).segments == 2
    for device in ("leaf-0", "leaf-2"):
        [segment] = store.segments(t0_ns=0, t1_ns=2**62, devices=[device])
        assert (segment.device, segment.t_start_ns, segment.t_end_ns) == \
            (device, T0 + S, T0 + 2 * S)
    assert _stored(store, "leaf-1") == [1, 2, 11, 12, 21]
