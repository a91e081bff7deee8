"""How long to wait before trying again a peer that failed (a device, the brokers).

``Backoff.delay_s(failures, rng)`` is the wait after the ``failures``-th failure in
a row: ``initial_s`` after the first, doubling after each further one, never more
than ``max_s``, and shortened by a random fraction of at most ``jitter`` so that
peers that failed together (a whole rack, a broker restart) do not retry in step.
It is a pure function of its arguments and the ``rng`` draw: the caller counts
failures and owns the rng (seed it in tests).

So a peer that comes back after an outage of any length is tried again at most
``max_s`` after it returns, plus the length of one attempt.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_MAX_DOUBLINGS = 60  # 2**60 x any initial_s is past any cap; keeps the float finite


@dataclass(frozen=True)
class Backoff:
    """A capped, jittered exponential backoff (see the module docstring). Seconds."""

    initial_s: float
    max_s: float
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if not 0 <= self.initial_s <= self.max_s:
            raise ValueError(f"backoff: need 0 <= initial_s ({self.initial_s:g}) <= "
                             f"max_s ({self.max_s:g})")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"backoff: jitter {self.jitter:g} is not in [0, 1)")

    def base_s(self, failures: int) -> float:
        """The wait after ``failures`` failures in a row before jitter (1 or less: initial)."""
        doublings = min(max(failures - 1, 0), _MAX_DOUBLINGS)
        return min(self.max_s, self.initial_s * 2.0 ** doublings)

    def delay_s(self, failures: int, rng: random.Random) -> float:
        """The wait after ``failures`` failures in a row: in ``[(1 - jitter) x base, base]``."""
        return self.base_s(failures) * (1.0 - self.jitter * rng.random())


__all__ = ["Backoff"]
