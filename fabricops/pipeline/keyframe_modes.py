"""The choice of each series' residual mode (the modes are in :mod:`.keyframe_pack`).

``choose_residuals`` scores every candidate mode of a series by its residual bits
(``residual_bits``) and keeps the cheapest. Scoring ~33 candidates on every point
was half of what encoding a merged ten-minute segment cost, so for series of at
least ``SCREEN_POINTS`` points the candidates are first scored on a fixed sample
of a quarter of the points (each sampled residual is exact: its lag's own
neighbour, not a neighbour in the sample), and only the ``KEEP`` best of each
series are scored again on every point, beside delta-of-delta, delta and the
rate mode, which are never screened (a counter that steps a few times scores
zero at every lag on a sample: screening it picked delta-of-delta, twice the
bits of delta). The mode kept is the cheapest of those, so never costlier than
delta-of-delta or delta; it may miss a mode the sample ranked below ``KEEP``
others. Shorter series (a window as the pipeline writes it) are scored on every
point for every candidate.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

import numpy as np
from numpy.typing import NDArray

from fabricops.pipeline.keyframe_pack import (
    DOD_MODE,
    F64,
    LAG_MASK,
    MAX_LAG,
    ORDER0,
    ORDER2,
    RATE_MODE,
    U8,
    U64,
    first_differences,
    lagged,
    lagged_into,
    rate_residuals,
    residual_bits,
)

SCREEN_POINTS: Final = 240
"""Series at least this long are screened on a sample of their points."""
SCREEN_SHARE: Final = 4
"""One point in this many is in the sample."""
KEEP: Final = 2
"""Candidates per series scored again on every point after the screen."""
ALWAYS: Final = (1, RATE_MODE)
"""Modes scored on every point, never screened: order 1 lag 1 (a counter that steps
now and then: on a sample, every lag scores the same zero) and the rate mode."""
STACK_VALUES: Final = 1 << 16
"""Residuals scored in one pass at most (512 kB, and 256 kB of float32 beside them:
within a core's cache; a larger block's candidates are scored one at a time)."""
_NEVER: Final = np.iinfo(np.int64).max

Rows = NDArray[np.intp]
_Candidate = tuple[int, U64, Rows | None]
"""A mode, what its residuals are taken of, and the series that are (None: all)."""


def choose_residuals(y: U64, order0: bool = False, ratio: F64 | None = None
                     ) -> tuple[U8, U64]:
    """Per series a cheap lag mode (see the module docstring) and its residuals;
    ``y[:, 0]`` must be 0.

    ``order0`` adds mode ``ORDER0`` (``y`` itself) to the candidates, ``ratio``
    (``rate_ratio`` of the block's timestamps, or one such row per series) adds
    ``RATE_MODE``. Each series' mode and residuals depend on that series alone."""
    n = y.shape[1]
    d = first_differences(y)
    modes = np.full(len(y), DOD_MODE, np.uint8)
    best = lagged(d, 1)
    cost = residual_bits(best)
    open_ = np.flatnonzero(cost > 0)  # a series without residuals cannot do better
    if len(open_) == 0:
        return modes, best
    whole = len(open_) == len(y)
    sub_y, sub_d = (y, d) if whole else (y[open_], d[open_])
    sub_modes, sub_best, sub_cost = modes[open_], best[open_], cost[open_]
    if ratio is not None and ratio.ndim == 2 and not whole:
        ratio = ratio[open_]
    candidates = _candidates(sub_y, sub_d, order0, ratio)
    if n >= SCREEN_POINTS:
        _screened(candidates, sub_modes, sub_best, sub_cost)
    else:
        _every_point(candidates, sub_modes, sub_best, sub_cost)
    modes[open_], best[open_] = sub_modes, sub_best
    return modes, best


@dataclass(frozen=True, eq=False)
class ModeChoice:
    """What a section writer asks of ``choose_residuals`` (see :mod:`.keyframe_batch`:
    the requests of many blocks are served in one call)."""

    y: U64
    order0: bool = False
    ratio: F64 | None = None

    @property
    def key(self) -> Hashable:
        """Requests of one key are served together."""
        return ModeChoice, self.y.shape[1], self.order0, self.ratio is None

    @property
    def size(self) -> int:
        """Values the request stacks."""
        return int(self.y.size)

    @staticmethod
    def serve(requests: list[ModeChoice]) -> list[tuple[U8, U64]]:
        """Each request's ``choose_residuals``, from one call over their stacked series."""
        first = requests[0]
        if len(requests) == 1:
            return [choose_residuals(first.y, first.order0, first.ratio)]
        y = np.concatenate([r.y for r in requests])
        ratio = None if first.ratio is None else np.concatenate(
            [np.broadcast_to(r.ratio, r.y.shape) for r in requests if r.ratio is not None])
        modes, e = choose_residuals(y, first.order0, ratio)
        cuts = np.cumsum([len(r.y) for r in requests])[:-1]
        return list(zip(np.split(modes, cuts), np.split(e, cuts), strict=True))


def _candidates(y: U64, d: U64, order0: bool, ratio: F64 | None) -> list[_Candidate]:
    """Every mode but delta-of-delta, with the series it is tried on.

    A monotone series (every difference of one sign: counters, timestamps) has,
    as long as it does not wrap, ``|y[i] - y[i-P]| >= |d[i]|`` and ``|y[i]| >= |d[i]|``
    at every point, so order 1 at a lag above 1 and order 0 cannot beat order 1 lag
    1: they are tried on the others (``mixed``) only (a wrapping series may then
    take a few more bytes than it could, never fewer)."""
    lags = range(2, min(MAX_LAG, y.shape[1] - 1) + 1)
    signed = d.view(np.int64)
    mixed = np.flatnonzero((signed < 0).any(axis=1) & (signed > 0).any(axis=1))
    out: list[_Candidate] = [(ORDER2 | lag, d, None) for lag in lags]
    out.append((1, y, None))
    if len(mixed):
        level = y[mixed]
        out += [(lag, level, mixed) for lag in lags]
        out += [(ORDER0, level, mixed)] if order0 else []
    if ratio is not None:
        out.append((RATE_MODE, rate_residuals(d, ratio), None))
    return out


def _residuals(mode: int, base: U64, out: U64 | None = None) -> U64:
    """The residuals of ``mode`` over ``base`` (its rows already picked); in ``out``
    if one is given."""
    if mode in (ORDER0, RATE_MODE):
        if out is None:
            return base
        np.copyto(out, base)
        return out
    lag = mode & LAG_MASK
    return lagged(base, lag) if out is None else lagged_into(base, lag, out)


def _every_point(candidates: list[_Candidate], modes: U8, best: U64, cost: NDArray[np.int64]
                 ) -> None:
    """Score every candidate on every point; keep each series' cheapest, in place.

    The candidates of one base (its lags) are scored together: their residuals are
    stacked, up to ``STACK_VALUES`` at a time, and their bits counted in one pass
    (a window's block has few points: the passes' fixed cost, not their length,
    was what scoring cost)."""
    scores = _scores(candidates, len(best), cost)
    by_base: dict[int, list[int]] = {}
    for k, (_, base, _) in enumerate(candidates, 1):
        by_base.setdefault(id(base), []).append(k)
    for ks in by_base.values():
        _, base, rows = candidates[ks[0] - 1]
        step = max(1, STACK_VALUES // max(base.size, 1))
        buffer = np.empty((min(step, len(ks)), *base.shape), np.uint64)
        for at in range(0, len(ks), step):
            part = ks[at:at + step]
            stack = buffer[:len(part)]
            for j, k in enumerate(part):
                _residuals(candidates[k - 1][0], base, stack[j])
            bits = residual_bits(stack)
            for j, k in enumerate(part):
                scores[k if rows is None else (k, rows)] = bits[j]
    _keep_cheapest(candidates, scores, modes, best, cost)


def _screened(candidates: list[_Candidate], modes: U8, best: U64, cost: NDArray[np.int64]
              ) -> None:
    """Score every candidate but ``ALWAYS`` on the sample; then each series' ``KEEP``
    best and ``ALWAYS`` on every point; keep each series' cheapest (delta-of-delta's
    ``cost`` to beat), in place."""
    at = _sample(best.shape[1])
    # delta-of-delta (row 0) and ALWAYS are scored on every point, not on the sample
    screen = np.full((len(candidates) + 1, len(best)), _NEVER, np.int64)
    always = [k for k, (mode, _, _) in enumerate(candidates, 1) if mode in ALWAYS]
    sampled: dict[int, U64] = {}  # per base, its sampled points (a base serves many lags)
    for k, (mode, base, rows) in enumerate(candidates, 1):
        if k in always:
            continue
        if id(base) not in sampled:
            sampled[id(base)] = base[:, at]
        here = sampled[id(base)]
        e = here if mode in (ORDER0, RATE_MODE) else here - base[:, at - (mode & LAG_MASK)]
        screen[k if rows is None else (k, rows)] = residual_bits(e)
    kept = np.argsort(screen, axis=0, kind="stable")[:KEEP]
    scores = _scores(candidates, len(best), cost)
    for k in sorted({*np.unique(kept).tolist(), *always}):
        mode, base, rows = candidates[k - 1]
        if k in always:
            mine = np.arange(len(best)) if rows is None else rows
        else:
            mine = np.flatnonzero((kept == k).any(axis=0) & (screen[k] < _NEVER))
        if len(mine):
            picked = base[mine if rows is None else np.searchsorted(rows, mine)]
            scores[k, mine] = residual_bits(_residuals(mode, picked))
    _keep_cheapest(candidates, scores, modes, best, cost)


def _scores(candidates: list[_Candidate], n_series: int, cost: NDArray[np.int64]
            ) -> NDArray[np.int64]:
    """Per series, delta-of-delta's ``cost`` (row 0), then a row per candidate, not
    scored yet (``_NEVER``)."""
    scores = np.full((len(candidates) + 1, n_series), _NEVER, np.int64)
    scores[0] = cost
    return scores


def _keep_cheapest(candidates: list[_Candidate], scores: NDArray[np.int64], modes: U8,
                   best: U64, cost: NDArray[np.int64]) -> None:
    """Per series the mode of its least score (the first of equals, delta-of-delta
    first), and its residuals, in place."""
    win = np.argmin(scores, axis=0)
    for k in np.unique(win[win > 0]).tolist():
        mode, base, rows = candidates[k - 1]
        mine = np.flatnonzero(win == k)
        picked = base[mine if rows is None else np.searchsorted(rows, mine)]
        modes[mine], best[mine], cost[mine] = mode, _residuals(mode, picked), scores[k, mine]


@lru_cache(maxsize=64)
def _sample(n: int) -> Rows:
    """The points a series of ``n`` is screened on: a fixed pseudo-random quarter of
    those with every lag's neighbour inside the series (random, so that no period
    of the data lines up with the sample)."""
    pool = np.arange(MAX_LAG, n)
    size = max(1, len(pool) // SCREEN_SHARE)
    picked = np.sort(np.random.default_rng(n).choice(pool, size, replace=False))
    picked.flags.writeable = False
    return picked
