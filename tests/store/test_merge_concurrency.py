"""A merge racing the pipeline's late-frame corrections, on SQLite and PostgreSQL: every
frame ends up stored, with its values, whichever commits first."""

from __future__ import annotations

import threading

from fabricops.core.bus import DEFAULT_PREFIX, Message, Topic, topic_name
from fabricops.core.frame import Frame
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.keyframe import decode_block
from fabricops.pipeline.segment_merge import MergeConfig, merge_segments
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.store import Store, StoreError

S = 10**9
T0 = 1_800_000_000 * S
DEVICES = ("leaf-1", "leaf-2")


def _frame(device: str, t_s: int, seq: int) -> Frame:
    return Frame.build(device, T0 + t_s * S, "gnmi", seq, [f"{device}:eth1"], ["in_octets"],
                       [t_s * 1000 + len(device)])


def _msgs(frames: list[Frame], offset: int) -> list[Message]:
    topic = topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)
    return [Message(topic, 0, offset + i, f.device.encode(), f.encode(), 0)
            for i, f in enumerate(frames)]


def _stored(store: Store) -> dict[tuple[str, int], list[int]]:
    """Per (device, time in s), every value stored for it, one per copy."""
    out: dict[tuple[str, int], list[int]] = {}
    for seg in store.segments(t0_ns=0, t1_ns=2**62):
        block = decode_block(seg.payload)
        for t, v in zip(block.ts_ns.tolist(), block.raw[0].tolist(), strict=True):
            out.setdefault((seg.device, (t - T0) // S), []).append(v)
    return out


def _process(worker: PipelineWorker, batch: list[Message]) -> None:
    """As the consumer loop handles a batch: again after a transient failure."""
    for _ in range(20):
        try:
            worker.process(batch)
            return
        except StoreError as exc:
            if not exc.transient:
                raise
            worker.recover()
    raise AssertionError("a batch failed 20 times")


def test_late_corrections_and_merges_together_lose_nothing(store: Store) -> None:
    times = range(10, 1200, 10)
    frames = [_frame(d, t, i) for i, t in enumerate(times) for d in DEVICES]
    late = frames[5::7]
    bus = MemoryBus()
    bus.start()
    worker = PipelineWorker(PipelineConfig(max_future_s=1e9), bus, store)
    on_time = [f for f in frames if f not in late]
    worker.process(_msgs(on_time, 0))
    worker.flush()
    done = threading.Event()
    errors: list[BaseException] = []

    def merging() -> None:
        try:
            while not done.is_set():
                merge_segments(store, older_than_ns=T0 + 1200 * S,
                               config=MergeConfig(span_s=120))
        except BaseException as exc:  # reported below, not lost with the thread
            errors.append(exc)

    merger = threading.Thread(target=merging)
    merger.start()
    try:
        for i, frame in enumerate(late):
            _process(worker, _msgs([frame], len(on_time) + i))
        worker.flush()  # the newest frame is not late: its window is open again
    finally:
        done.set()
        merger.join(timeout=120)
    assert not errors, errors
    merge_segments(store, older_than_ns=T0 + 1200 * S, config=MergeConfig(span_s=120))
    want = {(f.device, (f.ts_ns - T0) // S): [int(f.raw[0])] for f in frames}
    assert _stored(store) == want, "every frame, with its value, once after a last merge"
