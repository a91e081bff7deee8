"""Sensor noise: standard normal draws for every port of a fabric, each tick.

Drawing two normals per port each tick cost a tenth of a 16k-GPU tick. A
``SensorNoise`` draws one pool of standard normals when the twin is built and
hands out, per reading, a window of it at a random offset: per port, readings
from tick to tick are draws at independent random places of the pool, with the
pool's (normal) distribution. The pool and the offsets come from a generator of
their own, so the noise does not depend on what else the twin draws.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
MIN_POOL: Final = 1 << 16


class SensorNoise:
    """Windows of one pool of standard normals (see the module docstring)."""

    def __init__(self, rng: np.random.Generator, n_ports: int) -> None:
        self._rng = rng
        self._pool = rng.standard_normal(max(MIN_POOL, 4 * n_ports))
        self._pool.flags.writeable = False

    def draw(self, n: int) -> F64:
        """``n`` standard normal values (read-only; the pool wraps around)."""
        size = len(self._pool)
        if n > size:
            raise ValueError(f"{n} readings from a pool of {size}")
        start = int(self._rng.integers(0, size))
        if start + n <= size:
            return self._pool[start:start + n]
        wrapped = np.concatenate((self._pool[start:], self._pool[:start + n - size]))
        wrapped.flags.writeable = False
        return wrapped
