"""The fewest bytes any codec can spend on :mod:`noisy_telemetry`'s data: its noise floor.

The generator draws each value from slow hidden state (levels, phases, rates,
drifts) plus noise drawn independently for that value. Whatever a codec
learns of the hidden state, it still has to store the noise: by the source
coding theorem no codec that keeps counters exact can spend fewer bits on a
value, on average, than the entropy of its noise given everything else; for a
gauge kept within ``bound``, fewer than the Shannon lower bound of
rate-distortion with a maximum error. The bits counted here are each
conditional on the values counted before them, so they add up, and all that
is left out (timestamps, queue depths, errors, discards, link flaps, the
hidden state itself) only raises the true floor: the figure is a lower bound.

Counted, per stored (present) point after the first of its series:

* ``in/out_octets``: normal noise of sigma ``s`` bytes on the increment, which
  is then rounded to whole bytes: at least ``h = log2(s * sqrt(2 pi e))`` bits
  (rounding X to integers keeps at least its differential entropy), and 0;
* ``in/out_pkts`` given their octets: the frame-size mix's noise, the same way;
* ECN marks and PFC pauses given the port's rate: the entropy of a Poisson
  count of that rate (``poisson_bits``, taken at the grid rate just below the
  true one, so the bound holds: the entropy rises with the rate);
* ``rx/tx_power_dbm`` and ``temperature_c``: normal sensor noise of sigma ``s``,
  reported at a resolution ``r`` and kept within ``bound``: at least
  ``h - log2(2 * (bound + r / 2))`` bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Final

import numpy as np
from noisy_telemetry import METRICS, Draws
from numpy.typing import NDArray
from scipy.stats import poisson

from fabricops.core.catalogue import CATALOGUE
from fabricops.pipeline.keyframe import gauge_bounds

GAUSS_BITS: Final = float(np.log2(np.sqrt(2 * np.pi * np.e)))
"""Differential entropy of a standard normal, in bits: ``h(N(0, s)) = log2(s) + this``."""
EXACT: Final = ("in_octets", "out_octets", "in_pkts", "out_pkts")
POISSON: Final = ("ecn_marked_pkts", "pfc_rx_pause{prio=3}", "pfc_tx_pause{prio=3}")
BOUNDED: Final = {"rx_power_dbm": 0.01 / 2, "tx_power_dbm": 0.01 / 2,
                  "temperature_c": 1 / 256 / 2}
"""Gauges with sensor noise, and half the resolution the device reports them at."""
_GRID: Final = np.geomspace(1e-9, 1e9, 4097)


def poisson_bits(lam: NDArray[np.float64]) -> NDArray[np.float64]:
    """Entropy in bits of a Poisson count of each rate: summed over its probable counts
    below 1,000, a lower bound from the asymptotic series above (``1 / (12 lam)`` and
    the terms after it, at most twice that, subtracted from the normal's entropy)."""
    out = np.empty(len(lam))
    big = lam >= 1000
    out[big] = 0.5 * np.log2(2 * np.pi * np.e * lam[big]) - 1 / (6 * lam[big] * np.log(2))
    small = lam[~big]
    k = np.arange(int(1000 + 40 * np.sqrt(1000) + 60))[:, None]
    logp = poisson.logpmf(k, small[None, :])
    out[~big] = -(np.exp(logp) * logp).sum(axis=0) / np.log(2)
    return out


@cache
def _grid_bits() -> NDArray[np.float64]:
    return poisson_bits(_GRID)


@dataclass(frozen=True)
class Floor:
    """Bits of noise per metric, over ``samples`` stored samples."""

    bits: dict[str, float]
    samples: int

    def per_sample(self) -> float:
        """The floor in bytes per sample."""
        return sum(self.bits.values()) / 8 / self.samples


def _gauss(sigma: NDArray[np.float64], less: float = 0.0) -> float:
    s = sigma[sigma > 0]
    return float(np.maximum(np.log2(s) + GAUSS_BITS - less, 0.0).sum())


def _poisson(rate: NDArray[np.float64]) -> float:
    lam = rate[rate > _GRID[0]]
    below = np.searchsorted(_GRID, lam, side="right") - 1
    return float(_grid_bits()[below].sum())


def noise_floor(draws: Draws) -> Floor:
    """The floor of the data ``noisy_blocks`` drew into ``draws``, with each gauge kept
    within its ``gauge_bounds`` default (as the store keeps it)."""
    ids = np.array([CATALOGUE.id_of(m) for m in METRICS], np.uint16)
    bounds = dict(zip(METRICS, gauge_bounds(ids).tolist(), strict=True))
    bits = dict.fromkeys(EXACT + POISSON + tuple(BOUNDED), 0.0)
    samples = 0
    for noise in draws.devices:
        present = noise["present"]
        samples += int(present.sum())
        for name in bits:
            scale = np.where(present[:, METRICS.index(name)], noise[name], 0.0)
            if name in POISSON:
                bits[name] += _poisson(scale)
            elif name in BOUNDED:
                bits[name] += _gauss(scale, float(np.log2(2 * (bounds[name] + BOUNDED[name]))))
            else:
                bits[name] += _gauss(scale)
    return Floor(bits, samples)
