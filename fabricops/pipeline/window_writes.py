"""Complete windows written to the store: a group at a time, within a CPU budget.

``write_complete`` takes the complete windows of a ``WindowBook``, oldest
first. For each it reads what the store holds of it already (a window written
at a stop, by another owner, or covered by a merged segment; ``late.Held``),
for ``PREFETCH`` windows in one statement, and keeps the frames to write. The
frames of a group of windows (until they hold ``group_samples`` samples) are
encoded together (``segments_of``: the same segments as one by one). Groups
go on until ``budget_s`` of the thread's CPU time is spent, at least one; the
windows done are then written in one transaction with their streams'
checkpoints, and marked written in the book. An exception (the store away, a
block the encoder refuses) leaves the book as it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fabricops.core.frame import Frame
from fabricops.pipeline.intake import segments_of
from fabricops.pipeline.late import PREFETCH, held_windows
from fabricops.pipeline.windows import StreamKey, Window, WindowBook
from fabricops.store.records import WindowClose
from fabricops.store.store import Store

_Due = tuple[Window, int, list[Frame]]
"""A window, the time its close covers up to (``before_ts_ns``), and its frames to write."""


def write_complete(book: WindowBook, store: Store, snapshot: Callable[[StreamKey], bytes],
                   *, budget_s: float | None, group_samples: int) -> int:
    """Write complete windows of ``book`` (see the module docstring; ``budget_s`` None:
    all of them) with ``snapshot(stream)`` as each stream's checkpoint; the segments
    written."""
    started = time.thread_time()
    window_ns = book.window_ns
    done: list[tuple[Window, WindowClose]] = []
    group: list[_Due] = []
    samples, queue, ahead = 0, list(book.complete.values()), {}
    for i, window in enumerate(queue):
        if (not group and done and budget_s is not None
                and time.thread_time() - started >= budget_s):
            break
        key = (*window.key, window.index)
        if key not in ahead:
            ahead = held_windows(store, [(*w.key, w.index) for w in queue[i:i + PREFETCH]],
                                 window_ns)
        frames = [*ahead[key].within.values(), *window.frames]
        rows = ahead[key].to_write(frames)
        group.append((window, max(f.ts_ns for f in frames) + 1, rows))
        samples += sum(len(f.raw) for f in rows)
        if samples >= group_samples or i == len(queue) - 1:
            done += _closes(group, window_ns, snapshot)
            group, samples = [], 0
    if not done:
        return 0
    written = store.close_windows([c for _, c in done])
    for window, close in done:
        book.written(window, close.before_ts_ns)
    return written


def _closes(group: list[_Due], window_ns: int, snapshot: Callable[[StreamKey], bytes]
            ) -> list[tuple[Window, WindowClose]]:
    """Each window's close: the frames of all, where there are any, encoded together."""
    segments = iter(segments_of([(*w.key, rows) for w, _, rows in group if rows]))
    out = []
    for window, before_ns, rows in group:
        (device, source), t0 = window.key, window.index * window_ns
        out.append((window, WindowClose(
            device, source, (t0, t0 + window_ns), [next(segments)] if rows else [],
            before_ns, snapshot(window.key))))
    return out
