"""Joining the parts of one device's instant into one frame."""

from __future__ import annotations

import pytest

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame, FrameError
from fabricops.core.frame_join import adds_samples, join_frames, sample_keys

T = 1_800_000_000_000_000_000


def part(entities: list[str], metrics: list[str], values: list[int], *, seq: int = 7,
         ts: int = T, device: str = "leaf-1", source: str = "gnmi") -> Frame:
    return Frame.build(device, ts, source, seq, entities, metrics, values)


def samples(frame: Frame) -> list[tuple[str, str, int]]:
    return [(frame.entities[e], CATALOGUE.by_id(m).name, int(v)) for e, m, v in zip(
        frame.entity_idx.tolist(), frame.metric.tolist(), frame.raw.tolist(), strict=True)]


def test_parts_of_one_instant_become_one_frame_of_every_sample_in_part_order() -> None:
    eth1 = part(["eth1", "eth1"], ["in_octets", "out_octets"], [10, 20], seq=3)
    eth2 = part(["eth2", "eth2"], ["in_octets", "oper_status"], [30, 1], seq=4)
    both = part(["eth1", "eth3"], ["in_errors", "in_octets"], [5, 50], seq=5)
    joined, repeats = join_frames([eth1, eth2, both])
    assert repeats == 0
    assert (joined.device, joined.ts_ns, joined.source, joined.seq) == ("leaf-1", T, "gnmi", 3)
    assert joined.entities == ("eth1", "eth2", "eth3")
    assert samples(joined) == [("eth1", "in_octets", 10), ("eth1", "out_octets", 20),
                               ("eth2", "in_octets", 30), ("eth2", "oper_status", 1),
                               ("eth1", "in_errors", 5), ("eth3", "in_octets", 50)]
    assert join_frames([eth1, eth2], seq=99).frame.seq == 99


def test_a_later_part_replaces_what_an_earlier_one_gave_and_is_counted() -> None:
    counters = part(["eth2", "eth2"], ["in_octets", "oper_status"], [30, 1])
    deleted = part(["eth2"], ["oper_status"], [6])  # the port went away in the same instant
    joined, repeats = join_frames([counters, deleted])
    assert repeats == 1
    assert samples(joined) == [("eth2", "in_octets", 30), ("eth2", "oper_status", 6)]


def test_one_part_is_itself_and_parts_of_other_instants_are_refused() -> None:
    only = part(["eth1"], ["in_octets"], [1])
    assert join_frames([only]) == (only, 0)
    renumbered = join_frames([only], seq=8).frame
    assert (renumbered.seq, samples(renumbered)) == (8, samples(only))
    for other in (part(["eth2"], ["in_octets"], [2], ts=T + 1),
                  part(["eth2"], ["in_octets"], [2], device="leaf-2"),
                  part(["eth2"], ["in_octets"], [2], source="snmp")):
        with pytest.raises(FrameError, match="one device and instant"):
            join_frames([only, other])
    with pytest.raises(FrameError, match="no frames"):
        join_frames([])


def test_a_part_adds_samples_only_where_it_gives_an_entity_and_metric_not_held() -> None:
    held = [part(["eth1", "eth2"], ["in_octets", "in_octets"], [1, 2])]
    octets = CATALOGUE.id_of("in_octets")
    assert sample_keys(held) == {("eth1", octets), ("eth2", octets)}
    assert not adds_samples(held, part(["eth2"], ["in_octets"], [3]))
    assert adds_samples(held, part(["eth2"], ["out_octets"], [3]))
    assert adds_samples(held, part(["eth3"], ["in_octets"], [3]))
