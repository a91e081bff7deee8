"""Counter to rate: per-second rates between two snapshots of wrapping u64 counters.

A counter below its previous value either wrapped (the previous value was in
the top half of the u64 range and the new one is in the bottom half: the
delta is taken modulo 2**64) or was reset. When more than ``reset_fraction``
of a frame's counters that had counted anything went down together, the
device was reset (a reboot, a counter clear): every rate of that frame's
interval is unknown (NaN). Any other decrease is a counter going backwards
without a reset: its rate is NaN and the caller counts and reports it.

``frame_rates`` takes the counters of many frames (of many devices) at once;
``counter_rates`` those of one.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

U64 = NDArray[np.uint64]
F64 = NDArray[np.float64]
B = NDArray[np.bool_]
_TOP_HALF = np.uint64(1 << 63)
RESET_FRACTION = 0.5


class RateStep(NamedTuple):
    rate: F64  # per second; NaN where unknown
    wrapped: B  # counters that wrapped at 2**64
    backwards: B  # counters that went down without a device reset
    reset: bool  # the device reset its counters in this interval


class FrameRates(NamedTuple):
    rate: F64  # per counter, per second; NaN where unknown
    wrapped: B  # counters that wrapped at 2**64
    backwards: B  # counters that went down without their device's reset
    reset: B  # per frame: its device reset its counters in the interval


def frame_rates(prev: U64, cur: U64, dt_s: F64, frame: NDArray[np.intp], n_frames: int,
                known: B | None = None, *,
                reset_fraction: float = RESET_FRACTION) -> FrameRates:
    """Rates of ``cur`` against ``prev`` for the counters of ``n_frames`` frames:
    ``frame`` is each counter's frame, ``dt_s`` its interval (> 0, or NaN: no rate),
    ``known`` where it had a previous value (None: everywhere)."""
    rate = (cur - prev).astype(np.float64)
    rate /= dt_s
    down = cur < prev
    if known is not None:
        rate[~known] = np.nan
        down &= known
    if not down.any():  # the usual interval: every counter moved forward or stayed
        return FrameRates(rate, down, down, np.zeros(n_frames, bool))
    wrapped = down & (prev >= _TOP_HALF) & (cur < _TOP_HALF)
    decreased = down & ~wrapped
    counting = prev != 0
    if known is not None:
        counting &= known
    counted = np.bincount(frame, counting, n_frames)
    reset = (counted > 0) & (np.bincount(frame, decreased, n_frames) > reset_fraction * counted)
    in_reset = reset[frame]
    rate[decreased | in_reset] = np.nan
    return FrameRates(rate, wrapped, decreased & ~in_reset, reset)


def counter_rates(prev: U64, cur: U64, dt_s: float, *,
                  reset_fraction: float = RESET_FRACTION) -> RateStep:
    """Rates of ``cur`` against ``prev`` (same counters, same order, one device) over
    ``dt_s`` > 0 s."""
    if dt_s <= 0:
        raise ValueError(f"interval must be positive, got {dt_s} s")
    step = frame_rates(prev, cur, np.full(len(cur), dt_s), np.zeros(len(cur), np.intp), 1,
                       reset_fraction=reset_fraction)
    return RateStep(step.rate, step.wrapped, step.backwards, bool(step.reset[0]))
