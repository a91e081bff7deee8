"""What start-up built is out of the collector's reach; what comes later is not."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from fabricops.core import heap


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
    assert gc.get_freeze_count() == frozen

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
