"""The choice of each series' residual mode: the cheapest on short series, a screened
choice on long ones that round-trips and is never costlier than delta-of-delta."""

from __future__ import annotations

import numpy as np

from fabricops.pipeline import keyframe_modes as km
from fabricops.pipeline import keyframe_pack as kp


def _every_mode_cost(y: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """Per series, the least cost over every residual mode, each tried on every series."""
    d = kp.first_differences(y)
    tried = [kp.lagged(d, lag) for lag in range(1, kp.MAX_LAG + 1)]
    tried += [kp.lagged(y, lag) for lag in range(1, kp.MAX_LAG + 1)]
    tried += [y, kp.rate_residuals(d, ratio)]
    return np.min([kp.residual_bits(e) for e in tried], axis=0)


def test_the_chosen_mode_is_the_cheapest_of_all_modes_for_monotone_and_level_series() -> None:
    """Monotone series are not tried at order 0 or order 1 beyond lag 1 (they cannot win
    there); the choice must still be the cheapest any mode gives."""
    rng = np.random.default_rng(7)
    n = 60
    ts = np.cumsum(rng.integers(900_000_000, 1_100_000_000, n))
    ratio = kp.rate_ratio(ts)
    rising = np.cumsum(rng.integers(0, 10**6, (20, n)), axis=1)
    falling = -np.cumsum(rng.integers(0, 50, (5, n)), axis=1)
    periodic = np.cumsum(np.tile([0, 900, 20, 880], (5, n // 4)), axis=1)
    level = rng.integers(-40, 40, (20, n)) + np.arange(20)[:, None] * 1000
    square = np.tile(np.repeat([0, 700], 3), (5, n // 6)) + rng.integers(0, 3, (5, n))
    y = np.concatenate([rising, falling, periodic, level, square]).astype(np.int64)
    y = (y - y[:, :1]).view(np.uint64)
    modes, e = km.choose_residuals(y, order0=True, ratio=ratio)
    assert kp.residual_bits(e).tolist() == _every_mode_cost(y, ratio).tolist()
    assert kp.integrate(e[:, 1:], modes, ratio).tolist() == y[:, 1:].tolist()


def _mixed_series(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rising, falling, periodic, level and square-wave series of ``n`` points, minus
    their first point, and the rate ratio of jittery poll times."""
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.integers(900_000_000, 1_100_000_000, n))
    rising = np.cumsum(rng.integers(0, 10**6, (20, n)), axis=1)
    falling = -np.cumsum(rng.integers(0, 50, (5, n)), axis=1)
    periodic = np.cumsum(np.tile([0, 900, 20, 880, 5, 0, 700], (5, n // 7 + 1))[:, :n], axis=1)
    level = rng.integers(-40, 40, (20, n)) + np.arange(20)[:, None] * 1000
    square = np.tile(np.repeat([0, 700], 3), (5, n // 6 + 1))[:, :n] + rng.integers(0, 3, (5, n))
    y = np.concatenate([rising, falling, periodic, level, square]).astype(np.int64)
    return (y - y[:, :1]).view(np.uint64), kp.rate_ratio(ts)


def test_long_series_are_screened_and_still_round_trip_no_costlier_than_delta_of_delta(
) -> None:
    n = 4 * km.SCREEN_POINTS
    y, ratio = _mixed_series(n, seed=11)
    modes, e = km.choose_residuals(y, order0=True, ratio=ratio)
    assert kp.integrate(e[:, 1:], modes, ratio).tolist() == y[:, 1:].tolist()
    dod = kp.residual_bits(kp.lagged(kp.first_differences(y), 1))
    assert (kp.residual_bits(e) <= dod).all()


def test_screening_finds_a_period_and_costs_little_beside_trying_every_mode() -> None:
    """A counter rising by a 7-point pattern is all zeros at lag 7 (order 2): the sample
    must find it; over the whole mix the screened choice is within 2 % of the best."""
    n = 3 * km.SCREEN_POINTS
    y, ratio = _mixed_series(n, seed=12)
    modes, e = km.choose_residuals(y, order0=True, ratio=ratio)
    periodic = slice(25, 30)
    assert set(modes[periodic].tolist()) == {kp.ORDER2 | 7}
    assert kp.residual_bits(e[periodic]).max() <= 7 * 40  # only the first period is coded
    cheapest = _every_mode_cost(y, ratio)
    assert kp.residual_bits(e).sum() <= 1.02 * cheapest.sum()


def test_short_series_are_not_screened() -> None:
    """Below ``SCREEN_POINTS`` every mode is scored on every point: the cheapest wins."""
    n = km.SCREEN_POINTS - 1
    y, ratio = _mixed_series(n, seed=13)
    _, e = km.choose_residuals(y, order0=True, ratio=ratio)
    assert kp.residual_bits(e).tolist() == _every_mode_cost(y, ratio).tolist()


def test_the_screen_samples_are_fixed_and_leave_room_for_every_lag() -> None:
    at = km._sample(600)
    assert at.tolist() == km._sample(600).tolist()
    assert at.min() >= kp.MAX_LAG
    assert at.max() < 600
    assert len(at) == (600 - kp.MAX_LAG) // km.SCREEN_SHARE
    assert len(np.unique(at)) == len(at)
