"""A device that sends one instant in parts (a gNMI target's notification per
interface, all with the instant's timestamp): every part is kept and stepped, and
only a true copy counts as a duplicate."""

from __future__ import annotations

from fabricops.core.bus import DEFAULT_PREFIX, Message, Topic, topic_name
from fabricops.core.frame import Frame
from fabricops.pipeline.keyframe import decode_block
from fabricops.store.store import Store

from .conftest import bare_worker, messages

S = 10**9
T0 = 1_800_000_000 * S  # a window boundary (60 s windows)
PORTS = ("eth1", "eth2", "eth3")
TOPIC = topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)


def part(t_s: int, port: str, errors: int = 0) -> Frame:
    """One port's notification of the instant ``t_s``: octets and FCS errors."""
    return Frame.build("leaf-9", T0 + t_s * S, "gnmi", t_s, [f"leaf-9:{port}"] * 2,
                       ["in_octets", "in_fcs_errors"], [t_s * 1000, errors])


def instant(t_s: int, eth3_errors: int = 0) -> list[Frame]:
    return [part(t_s, p, eth3_errors if p == "eth3" else 0) for p in PORTS]


def stored(store: Store) -> dict[str, list[int]]:
    """Per port, the times (s after T0) its octets were stored at, window by window."""
    out: dict[str, list[int]] = {}
    for seg in store.segments(t0_ns=0, t1_ns=2**62):
        block = decode_block(seg.payload)
        for row, entity in enumerate(block.entity):
            if block.metric[row] == block.metric[0]:
                ts = block.ts_ns[block.present[row]]
                out.setdefault(entity.removeprefix("leaf-9:"), []).extend(
                    ((ts - T0) // S).tolist())
    return {port: sorted(times) for port, times in out.items()}


def test_the_parts_of_each_instant_are_joined_stepped_and_stored(store: Store) -> None:
    worker = bare_worker(store)
    result = worker.process(messages(*instant(10), *instant(20), *instant(30, eth3_errors=4)))
    assert (result.frames, result.joined, result.rejected) == (3, 6, {})
    raised = {(e.entity, e.metric, (e.ts_ns - T0) // S) for e in result.events}
    assert ("leaf-9:eth3", "in_fcs_errors", 30) in raised, "eth3's part was stepped"
    assert worker.metrics.joined._value.get() == 6
    worker.flush()
    assert stored(store) == {p: [10, 20, 30] for p in PORTS}


def test_a_part_in_a_later_batch_is_kept_and_stepped_and_only_a_copy_is_a_duplicate(
        store: Store) -> None:
    worker = bare_worker(store)
    eth1, eth2, eth3 = instant(10, eth3_errors=20)
    worker.process(messages(*instant(5), eth1, eth2))
    later = worker.process(messages(eth3, offset=5))
    assert (later.frames, later.joined, later.late, later.rejected) == (1, 1, 0, {})
    # stepped: eth3's errors over the 5 s since its own last value
    assert [(e.entity, e.metric, e.value) for e in later.events] == [
        ("leaf-9:eth3", "in_fcs_errors", 4.0)]
    again = worker.process(messages(eth3, eth1, offset=6))
    assert again.rejected == {"duplicate": 2}
    worker.flush()
    assert stored(store) == {p: [5, 10] for p in PORTS}


def test_a_part_of_a_written_window_is_joined_to_its_stored_instant(store: Store) -> None:
    worker = bare_worker(store)
    eth1, eth2, eth3 = instant(10)
    worker.process(messages(eth1, eth2, *instant(20), *instant(70)))  # writes window 0
    assert stored(store) == {"eth1": [10, 20], "eth2": [10, 20], "eth3": [20]}
    fixed = worker.process(messages(eth3, offset=8))
    assert (fixed.late, fixed.rejected) == (1, {})
    assert stored(store) == {p: [10, 20] for p in PORTS}
    copy = worker.process(messages(eth3, offset=9))
    assert copy.rejected == {"duplicate": 1}
    assert stored(store) == {p: [10, 20] for p in PORTS}


def test_parts_from_two_partitions_are_kept_apart_and_both_held(store: Store) -> None:
    worker = bare_worker(store)
    eth1, eth2, _ = instant(10)
    other = Message(TOPIC, 1, 5, b"leaf-9", eth2.encode(), 0)
    result = worker.process([*messages(eth1), other])
    # not joined in the batch (each keeps its offset), the second stepped as a part
    assert (result.frames, result.joined, result.late, result.rejected) == (2, 1, 0, {})
    assert worker.windows.holds() == {(TOPIC, 0): 0, (TOPIC, 1): 5}
    worker.flush()
    assert stored(store) == {"eth1": [10], "eth2": [10]}
