"""The start-up heap of a long-running process, out of the garbage collector's way.

What a service builds before it serves (a topology of 100k GPUs, its indices,
the twin's layouts, caches) lives as long as the process: 1.8 M objects for
the 100k-GPU twin. CPython's collector scans every tracked object on each
full collection, and a twin tick at that scale spent as long in the collector
as in its own work. ``settle()`` collects once and moves what is alive into
the permanent generation (``gc.freeze``), which no collection scans; what
the process makes afterwards is collected as usual, with young collections
once ``YOUNG`` objects are new rather than 700 (CPython's default before
3.13): a twin tick makes thousands of frames that live for one tick, and at
700 its young collections took about 0.7 ms of a 21 ms tick of the
16,000-GPU fat-tree.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

YOUNG: Final = 10_000
"""Objects made, net of those freed, before a young collection (CPython's default:
700, and 2,000 since 3.13)."""


def settle() -> int:
    """Collect, then freeze every object alive now, and collect the young generation
    once ``YOUNG`` objects are new, or later if so set already (a threshold of 0, no
    automatic collection, is kept); the number frozen."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if young:
        gc.set_threshold(max(young, YOUNG), middle, old)
    return gc.get_freeze_count()


@contextmanager
def paused() -> Iterator[None]:
    """No automatic collection while the block runs; as it was after.

    For a bulk of objects that hold no reference cycle (a tick's frames, one per
    device). Made with the collector on, 100,000 of them set off ten young
    collections, each moving its survivors a generation up, and so a middle or
    full collection every few ticks: at 100,000 devices making a tick's frames
    took 100 ms, 40 ms of it their own work. Paused, they meet one young
    collection, after (none, with ``make_room``). Nothing is lost: with no
    cycle, every object is freed by its reference count as before. Where
    automatic collection was off, it stays off; nested or in several threads,
    it is on again once the first block that found it on ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def make_room(objects: int) -> None:
    """Young collections no more often than every ``2 * objects`` new objects (never
    more often than set already; a threshold of 0 is kept).

    For a process that makes a bulk of ``objects`` each cycle and frees the last
    bulk before (a twin tick's frames: two objects a device). The collector
    counts new objects net of those freed, so bulks that come and go meet no
    young collection; with the threshold below a bulk, each bulk is scanned
    while alive: 30-50 ms a tick at 100,000 devices. The cost: up to that many
    objects in reference cycles wait longer to be freed."""
    young, middle, old = gc.get_threshold()
    if young and young < 2 * objects:
        gc.set_threshold(2 * objects, middle, old)
