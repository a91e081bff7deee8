"""Values the store cannot hold, or no device could read, never reach it: a frame
the store cannot keep is dead-lettered, implausible samples are dropped and counted."""

from __future__ import annotations

import math

from fabricops.core.bus import DEFAULT_PREFIX, Message, Topic, topic_name
from fabricops.core.deadletter import DeadLetter
from fabricops.core.frame import Frame
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.admit import LayoutChecks, admit_samples
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.store.store import Store

T = 1_800_000_010 * 10**9


def _gauges(values: list[float], device: str = "leaf-9") -> Frame:
    return Frame.build(device, T, "gnmi", 1, [f"{device}:eth{i}" for i in range(len(values))],
                       ["temperature_c"] * len(values), values)


def test_implausible_samples_are_dropped_with_their_reason_and_the_rest_kept() -> None:
    frame, dropped = admit_samples(_gauges([45.0, math.nan, 1e6, 50.0]))
    assert frame.values().tolist() == [45.0, 50.0]
    [d] = dropped
    assert (d.reason, d.count) == ("out_of_range", 2)
    assert "temperature_c of leaf-9:eth1" in d.detail


def test_every_frame_of_a_known_layout_is_still_checked_sample_by_sample() -> None:
    """The checks a layout needs are kept between frames (``LayoutChecks``, found by
    the very column a decoder shares); the values never are."""
    mixed = ["in_octets", "temperature_c", "oper_status", "rx_power_dbm"]
    first = Frame.build("leaf-9", T, "gnmi", 1, ["leaf-9:eth1"] * 4, mixed,
                        [2.0**63, 45.0, 1, -3.0])
    layouts = LayoutChecks()

    def again(values: list[float]) -> Frame:  # the same columns, as a decoder shares them
        raw = Frame.build("leaf-9", T, "gnmi", 1, ["leaf-9:eth1"] * 4, mixed, values).raw
        return first.again(T, 2, raw)

    for checks in (layouts, None):
        assert admit_samples(first, layouts=checks)[1] == []
        kept, [d] = admit_samples(again([1.0, math.inf, 1, -3.0]), layouts=checks)
        assert (d.reason, d.count) == ("out_of_range", 1)
        assert kept.values().tolist() == [1.0, 1.0, -3.0]
        kept, [d] = admit_samples(again([1.0, 45.0, 9, 500.0]), layouts=checks)
        assert (d.reason, d.count) == ("out_of_range", 2)
        assert kept.values().tolist() == [1.0, 45.0]


def test_a_frame_the_store_cannot_keep_is_dead_lettered_and_the_batch_goes_on(
    store: Store,
) -> None:
    bus = MemoryBus()
    bus.start()
    worker = PipelineWorker(PipelineConfig(max_future_s=1e9), bus, store)
    topic = topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)
    nul = _gauges([40.0], device="leaf\x009")
    good = _gauges([41.0])
    result = worker.process([Message(topic, 0, 0, b"x", nul.encode(), 0),
                             Message(topic, 0, 1, b"leaf-9", good.encode(), 0)])
    assert (result.frames, result.rejected) == (1, {"unstorable": 1})
    [letter] = [DeadLetter.decode(m.value) for m in
                bus.subscribe([topic_name(Topic.DEAD_LETTERS)], "r").poll(0.5)]
    assert (letter.reason, letter.offset) == ("unstorable", 0)
    assert "NUL" in letter.detail
    assert [f.device for f in worker.windows.frames()] == ["leaf-9"]


def test_an_entity_name_the_store_cannot_keep_is_refused_in_every_frame(store: Store) -> None:
    """Entity names are checked once per device table: a table that failed is checked
    (and refused) again, one that passed is not checked again but a new one is."""
    bus = MemoryBus()
    bus.start()
    worker = PipelineWorker(PipelineConfig(max_future_s=1e9), bus, store)
    topic = topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)

    def frame(t: int, entity: str) -> bytes:
        return Frame.build("leaf-9", T + t * 10**9, "gnmi", t, [entity], ["temperature_c"],
                           [40.0]).encode()

    long = "leaf-9:" + "x" * 300
    records = [frame(0, long), frame(1, long), frame(2, "leaf-9:eth1"), frame(3, "leaf-9:eth1"),
               frame(4, long)]
    result = worker.process([Message(topic, 0, i, b"leaf-9", r, 0)
                             for i, r in enumerate(records)])
    assert (result.frames, result.rejected) == (2, {"unstorable": 3})
