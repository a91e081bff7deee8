"""The start-up heap of a long-running process, out of the garbage collector's way.

What a service builds before it serves (a topology of 100k GPUs, its indices,
the twin's layouts, caches) lives as long as the process: 1.8 M objects for
the 100k-GPU twin. CPython's collector scans every tracked object on each
full collection, and a twin tick at that scale spent as long in the collector
as in its own work. ``settle()`` collects once and moves what is alive into
the permanent generation (``gc.freeze``), which no collection scans; what
the process makes afterwards is collected as usual.
"""

from __future__ import annotations

import gc


def settle() -> int:
    """Collect, then freeze every object alive now; the number frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
