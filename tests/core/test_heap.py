"""What start-up built is out of the collector's reach; what comes later is not."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import numpy as np
import pytest

from fabricops.core import heap
from fabricops.core.frame import Frame, Source


@pytest.fixture
def unfrozen() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("unfrozen")
def test_settle_freezes_what_is_alive_and_later_cycles_are_still_collected() -> None:
    built = [[i] for i in range(1000)]
    frozen = heap.settle()
    assert frozen >= len(built)
    # frozen: in no generation a collection scans (the count itself can drop at any
    # time, as another thread frees a frozen object)
    assert not any(o is built or o is built[-1] for o in gc.get_objects())

    class Node:
        def __init__(self) -> None:
            self.me = self

    Node()  # a cycle made after settling: only the collector can free it
    assert gc.collect() >= 1


@pytest.mark.usefixtures("unfrozen")
def test_settle_collects_the_young_less_often_but_never_more_often_than_set() -> None:
    gc.set_threshold(700, 10, 10)
    heap.settle()
    assert gc.get_threshold() == (heap.YOUNG, 10, 10)
    gc.set_threshold(50_000, 5, 5)
    heap.settle()
    assert gc.get_threshold() == (50_000, 5, 5)
    gc.set_threshold(0, 5, 5)
    heap.settle()
    assert gc.get_threshold() == (0, 5, 5)


def test_frames_made_again_in_bulk_leave_the_collector_on_with_room_for_them() -> None:
    like = Frame("leaf-1", 1, Source.SIM, 1, ("eth1",), np.zeros(2, np.uint32),
                 np.array([1, 2], np.uint16), np.zeros(2, np.uint64))
    raws = [np.arange(2, dtype=np.uint64) + i for i in range(3)]
    threshold = gc.get_threshold()
    try:
        gc.set_threshold(4, 10, 10)
        made = Frame.again_each([like] * 3, 5, [7, 8, 9], raws)
        assert gc.isenabled()
        assert gc.get_threshold()[0] == 6  # room for twice a bulk of 3 frames
    finally:
        gc.set_threshold(*threshold)
    assert [(f.ts_ns, f.seq, f.raw.tolist()) for f in made] == [
        (5, 7, [0, 1]), (5, 8, [1, 2]), (5, 9, [2, 3])]
    assert all(f.entities is like.entities and f.metric is like.metric for f in made)


def test_make_room_only_ever_makes_young_collections_rarer() -> None:
    threshold = gc.get_threshold()
    try:
        gc.set_threshold(10_000, 10, 10)
        heap.make_room(100_000)
        assert gc.get_threshold() == (200_000, 10, 10)
        heap.make_room(1_000)  # a smaller bulk does not bring them back
        assert gc.get_threshold() == (200_000, 10, 10)
        gc.set_threshold(0, 10, 10)
        heap.make_room(100_000)  # automatic collection set off: left off
        assert gc.get_threshold() == (0, 10, 10)
    finally:
        gc.set_threshold(*threshold)
