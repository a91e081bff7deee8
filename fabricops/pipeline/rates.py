"""Counter to rate: per-second rates between two snapshots of wrapping u64 counters.

A counter below its previous value either wrapped (the previous value was in
the top half of the u64 range and the new one is in the bottom half: the
delta is taken modulo 2**64) or was reset. When more than ``reset_fraction``
of the counters that had counted anything went down together, the device was
reset (a reboot, a counter clear): every rate of that interval is unknown
(NaN). Any other decrease is a counter going backwards without a reset: its
rate is NaN and the caller counts and reports it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

U64 = NDArray[np.uint64]
F64 = NDArray[np.float64]
B = NDArray[np.bool_]
_TOP_HALF = np.uint64(1 << 63)


class RateStep(NamedTuple):
    rate: F64  # per second; NaN where unknown
    wrapped: B  # counters that wrapped at 2**64
    backwards: B  # counters that went down without a device reset
    reset: bool  # the device reset its counters in this interval


def counter_rates(prev: U64, cur: U64, dt_s: float, *, reset_fraction: float = 0.5) -> RateStep:
    """Rates of ``cur`` against ``prev`` (same counters, same order) over ``dt_s`` > 0 s."""
    if dt_s <= 0:
        raise ValueError(f"interval must be positive, got {dt_s} s")
    down = cur < prev
    if not down.any():  # the usual interval: every counter moved forward or stayed
        rate = (cur - prev).astype(np.float64)
        rate /= dt_s
        return RateStep(rate, down, down, False)
    wrapped = down & (prev >= _TOP_HALF) & (cur < _TOP_HALF)
    decreased = down & ~wrapped
    counting = int(np.count_nonzero(prev))
    reset = counting > 0 and np.count_nonzero(decreased) > reset_fraction * counting
    rate = (cur - prev).astype(np.float64) / dt_s
    if reset:
        rate[:] = np.nan
        return RateStep(rate, wrapped, np.zeros_like(down), True)
    rate[decreased] = np.nan
    return RateStep(rate, wrapped, decreased, False)
