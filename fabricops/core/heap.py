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


def make_room(objects: int) -> None:
    """Young collections no more often than every ``2 * objects`` new objects (never
    more often than set already; a threshold of 0 is kept).

    For a process that makes a bulk of ``objects`` each cycle and frees the last
    bulk before (a twin tick's frames: one object a device). The collector
    counts new objects net of those freed, so bulks that come and go meet no
    young collection. With the threshold below a bulk, each bulk set off young
    collections while alive, each moving its survivors a generation up, and so
    a middle or full collection every few ticks: at 100,000 devices making a
    tick's frames took 100 ms, 40 ms of it their own work. The cost: up to that
    many objects in reference cycles wait longer to be freed."""
    young, middle, old = gc.get_threshold()
    if young and young < 2 * objects:
        gc.set_threshold(2 * objects, middle, old)
