"""Partitions moving between live pipeline workers (members joining and leaving the
group) lose no frame: a worker that takes over a device starts from what the
previous owner made durable, never from an older copy of its own."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from fabricops.core.bus import DEFAULT_PREFIX, Message, Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.frame import Frame
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.store.store import Store, StoreConfig
from tests.faults.counting import Key, stored_points

from .conftest import small_sim

CONFIG = PipelineConfig(max_future_s=1e9, keyframe_interval_s=10, poll_timeout_s=0.05)


def _caught_up(bus: MemoryBus) -> bool:
    topic = topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)
    return sum(bus.read_positions(CONFIG.group, topic).values()) >= sum(bus.end_offsets(topic))


def _wait(done: object, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the workers did not catch up in time"
        threading.Event().wait(0.05)


def test_members_joining_and_leaving_lose_nothing_and_store_nothing_twice(
    tmp_path: Path,
) -> None:
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'f.db'}"))
    store.start()
    bus = MemoryBus()
    bus.start()
    sim = small_sim(seed=9)
    sink = BusFrameSink(bus)
    sent: set[Key] = set()

    def feed(ticks: int) -> None:
        for _ in range(ticks):
            sim.step()
            frames = sim.frames()
            sent.update((f.device, f.source.value, f.ts_ns) for f in frames)
            sink.publish_frames(frames)
        _wait(lambda: _caught_up(bus))

    a, b = PipelineWorker(CONFIG, bus, store), PipelineWorker(CONFIG, bus, store)
    a.start()
    b.start()
    try:
        feed(25)  # a and b each own half the devices
        c = PipelineWorker(CONFIG, bus, store)
        c.start()  # devices move between a and b too, while both keep running
        feed(25)
        c.stop()  # and back
        feed(25)
        b.stop()  # a takes b's devices, mid-window
        feed(25)
    finally:
        a.stop()
        b.stop()
    stored = stored_points(store)
    store.stop()
    lost = sent - set(stored)
    assert not lost, f"{len(lost)} of {len(sent)} frames lost"
    assert max(stored.values()) == 1


T0 = 1_800_000_000 * 10**9
TOPIC = topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)


def _messages(device: str, *seconds: int) -> list[Message]:
    """One in_octets frame of ``device`` at each of ``seconds``, as the bus delivers it."""
    return [Message(TOPIC, 0, s, device.encode(), Frame.build(
        device, T0 + s * 10**9, "gnmi", s, [f"{device}:eth1"], ["in_octets"],
        [1000 * s]).encode(), 0) for s in seconds]


def _store_and_bus(tmp_path: Path) -> tuple[Store, MemoryBus]:
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'f.db'}"))
    store.start()
    bus = MemoryBus()
    bus.start()
    return store, bus


def test_a_stale_owner_writing_a_window_keeps_what_another_owner_wrote_in_it(
    tmp_path: Path,
) -> None:
    store, bus = _store_and_bus(tmp_path)

    def msgs(*seconds: int) -> list[Message]:
        return _messages("leaf-9", *seconds)

    a = PipelineWorker(PipelineConfig(max_future_s=1e9), bus, store)
    a.process(msgs(10, 20))
    b = PipelineWorker(PipelineConfig(max_future_s=1e9), bus, store)
    b.restore()  # b takes the device over: the bus delivers 10 and 20 again
    b.process(msgs(10, 20, 30, 40))
    b.process(msgs(70))  # b sees the window end and writes it
    assert b.windows.holds() == {(TOPIC, 0): 70}, "only 70 is still to be written"
    a.process(msgs(70))  # a, stale, knowing only of 10 and 20, writes the window too
    a.flush()
    b.flush()
    stored = stored_points(store)
    store.stop()
    assert sorted((t - T0) // 10**9 for _, _, t in stored) == [10, 20, 30, 40, 70]
    assert max(stored.values()) == 1


def test_a_stale_owner_writing_many_windows_at_once_keeps_what_others_wrote_in_each(
    tmp_path: Path,
) -> None:
    """The window writer reads what the store holds of many windows in one statement:
    each window keeps what another owner wrote in it, and no other window's."""
    store, bus = _store_and_bus(tmp_path)
    devices = [f"leaf-{d}" for d in range(5)]
    a = PipelineWorker(PipelineConfig(max_future_s=1e9), bus, store)
    for d in devices:
        a.process(_messages(d, 10, 20))
    b = PipelineWorker(PipelineConfig(max_future_s=1e9), bus, store)
    b.restore()
    for d in devices[1::2]:  # b owned leaf-1 and leaf-3 for a while, and wrote them
        b.process(_messages(d, 10, 20, 30, 40) + _messages(d, 70))
    a.flush()  # a, stale, writes all five windows in one pass
    b.flush()
    stored = stored_points(store)
    store.stop()
    for i, d in enumerate(devices):
        want = [10, 20, 30, 40, 70] if i % 2 else [10, 20]
        assert sorted((t - T0) // 10**9 for dev, _, t in stored if dev == d) == want, d
    assert max(stored.values()) == 1
