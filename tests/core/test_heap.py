"""What start-up built is out of the collector's reach; what comes later is not."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from fabricops.core import heap


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


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
