"""A tick's frames made again in place, once nothing outside the twin holds them.

A tick's frames are one object and one array view a device, and the two
matrices the views read. Making and freeing them was half of a tick at 16,000
single-NIC hosts. Most consumers drop a tick's frames within the tick (the
bus encodes them, the run file writes them); an agent's board keeps the last
tick's until the next, and a gNMI stream the one before a little longer. So
the twin keeps up to three ticks' frames, and when an older one is held by
nothing else, it writes the new values into that tick's matrices and the new
time and sequence numbers into its frames.

"Held by nothing else" is told by CPython's reference counts: right after a
generation is made, ``_counts`` notes the most references any of its frames,
any of their value arrays and each matrix has; a generation is free when those
counts are the same again. Anything that keeps a frame, a value array, a view
of one (numpy views point at the matrix) or a buffer of one adds a reference.
Only on CPython with the GIL: elsewhere every tick's frames are made anew.
"""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Callable
from operator import attrgetter
from typing import Final

import numpy as np
import numpy.typing as npt

from fabricops.core.frame import Frame

U64 = npt.NDArray[np.uint64]
Matrices = tuple[U64, U64]
ENABLED: Final = (sys.implementation.name == "cpython"
                  and not sysconfig.get_config_var("Py_GIL_DISABLED"))
KEPT: Final = 3
"""Generations kept at most: the one a board holds until the next tick, the one before,
which a gNMI stream may still be sending, and the one to refill."""
LONGEST_WAIT: Final = 63
"""Ticks at most between two looks for a free generation, after looks that found none
(a consumer that keeps older ticks, such as a gNMI stream sampling slower than the
twin ticks, would have each look cost a pass over every frame for nothing)."""
_raw = attrgetter("raw")


def _counts(matrices: Matrices, frames: list[Frame]) -> tuple[int, ...]:
    """The most references any frame and any value array has, then each matrix's (as
    counted from here: compare only with counts taken by this function)."""
    count = sys.getrefcount
    return (max(map(count, frames), default=0), max(map(count, map(_raw, frames)), default=0),
            count(matrices[0]), count(matrices[1]))


class Generation:
    """One tick's frames and the matrices their values view."""

    def __init__(self, matrices: Matrices, frames: list[Frame]) -> None:
        self.matrices = matrices
        self.frames = frames
        self._alone = _counts(matrices, frames)

    def free(self) -> bool:
        """True when nothing but this generation holds its frames, values and matrices."""
        return _counts(self.matrices, self.frames) == self._alone


class FramePool:
    """The twin's last ``KEPT`` generations of frames; ``frames`` refills a free one."""

    def __init__(self, enabled: bool = ENABLED) -> None:
        self.enabled = enabled
        self._kept: list[Generation] = []
        self._wait = self._backoff = 0
        self.refilled = self.made = self.looks = 0

    def frames(self, make: Callable[[], tuple[Matrices, list[Frame]]],
               fill: Callable[[Matrices], object], ts_ns: int, seqs: list[int]) -> list[Frame]:
        """A tick's frames: the oldest free generation kept, with its matrices refilled
        by ``fill`` (which leaves them read-only) and its frames given ``ts_ns`` and
        ``seqs``; else those ``make`` returns, kept for a later tick in place of the
        oldest if ``KEPT`` are kept already. After a look that found none free, the next
        looks wait 1, 3, 7 ... up to ``LONGEST_WAIT`` ticks. The caller gets a list of its own."""
        if not self.enabled:
            return make()[1]
        if self._wait:
            self._wait -= 1
            return self._make(make)
        self.looks += 1
        for at, kept in enumerate(self._kept):
            if kept.free():
                self._backoff = 0
                del self._kept[at]
                fill(kept.matrices)
                Frame.restamp_each(kept.frames, ts_ns, seqs)
                self._kept.append(kept)
                self.refilled += 1
                return list(kept.frames)
        if len(self._kept) == KEPT:  # even the oldest is held: wait 1, 3, 7 ... ticks
            self._backoff = self._wait = min(2 * self._backoff + 1, LONGEST_WAIT)
        return self._make(make)

    def _make(self, make: Callable[[], tuple[Matrices, list[Frame]]]) -> list[Frame]:
        del self._kept[:max(0, len(self._kept) - KEPT + 1)]  # held elsewhere: theirs now
        self._kept.append(Generation(*make()))
        self.made += 1
        return list(self._kept[-1].frames)
