"""The choice of each series' residual mode: the cheapest on short series, a screened
choice on long ones that round-trips and is never costlier than delta-of-delta."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.pipeline import keyframe_modes as km
from fabricops.pipeline import keyframe_pack as kp


def _every_mode_cost(y: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """Per series, the least cost over every residual mode, each tried on every series."""
    d = kp.first_differences(y)
    tried = [kp.lagged(d, lag) for lag in range(1, kp.MAX_LAG + 1)]
    tried += [kp.lagged(y, lag) for lag in range(1, kp.MAX_LAG + 1)]
    tried += [y, kp.rate_residuals(d, ratio)]
    return np.min([kp.residual_bits(e) for e in tried], axis=0)


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


def test_long_series_are_screened_and_still_round_trip(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    def unscreened(*_: object) -> None:
        raise AssertionError("a long series was scored on every point for every mode")

    monkeypatch.setattr(km, "_every_point", unscreened)
    for n in (km.SCREEN_POINTS, 4 * km.SCREEN_POINTS + 1):
        y, ratio = _mixed_series(n, seed=11)
        modes, e = km.choose_residuals(y, order0=True, ratio=ratio)
        assert kp.integrate(e[:, 1:], modes, ratio).tolist() == y[:, 1:].tolist()
        again = km.choose_residuals(y, order0=True, ratio=ratio)
        assert again[0].tolist() == modes.tolist()
        assert again[1].tolist() == e.tolist()


def test_counters_that_step_now_and_then_take_delta_when_screened() -> None:
    """An error counter stepping 1-4 times in ten minutes scores zero at every lag on a
    sample; it must still get delta (one residual a step), not delta-of-delta (two)."""
    rng = np.random.default_rng(5)
    n, rows = 600, 200
    steps = np.zeros((rows, n), np.int64)
    for i in range(rows):
        at = rng.choice(np.arange(1, n), int(rng.integers(1, 5)), replace=False)
        steps[i, at] = rng.integers(1, 1000, len(at))
    y = np.cumsum(steps, axis=1).view(np.uint64)
    ratio = kp.rate_ratio(np.arange(n, dtype=np.int64) * 10**9)
    modes, e = km.choose_residuals(y, order0=True, ratio=ratio)
    assert set(modes.tolist()) <= {1, kp.ORDER2 | 1, *range(kp.ORDER2 | 2, kp.ORDER2 | 17)}
    assert kp.residual_bits(e).sum() <= 1.01 * _every_mode_cost(y, ratio).sum()


def test_screening_finds_a_period_and_costs_little_beside_trying_every_mode() -> None:
    """A counter rising by a 7-point pattern is all zeros at lag 7 (order 2): the sample
    must find it; over the whole mix the screened choice is within 2 % of the best."""
    n = 3 * km.SCREEN_POINTS
    y, ratio = _mixed_series(n, seed=12)
    modes, e = km.choose_residuals(y, order0=True, ratio=ratio)
    assert kp.integrate(e[:, 1:], modes, ratio).tolist() == y[:, 1:].tolist()
    periodic = slice(25, 30)
    assert set(modes[periodic].tolist()) == {kp.ORDER2 | 7}
    assert kp.residual_bits(e[periodic]).max() <= 7 * 40  # only the first period is coded
    cheapest = _every_mode_cost(y, ratio)
    assert kp.residual_bits(e).sum() <= 1.02 * cheapest.sum()


@pytest.mark.parametrize("n", [60, km.SCREEN_POINTS - 1])
def test_short_series_take_the_cheapest_of_all_modes(n: int) -> None:
    """Below ``SCREEN_POINTS`` (a window as the pipeline writes it) every mode is scored
    on every point. Monotone series are not tried at order 0 or order 1 beyond lag 1
    (they cannot win there); the choice must still be the cheapest any mode gives."""
    y, ratio = _mixed_series(n, seed=7)
    modes, e = km.choose_residuals(y, order0=True, ratio=ratio)
    assert kp.residual_bits(e).tolist() == _every_mode_cost(y, ratio).tolist()
    assert kp.integrate(e[:, 1:], modes, ratio).tolist() == y[:, 1:].tolist()


def test_the_screen_samples_are_fixed_and_leave_room_for_every_lag() -> None:
    at = km._sample(600)
    assert at.tolist() == km._sample(600).tolist()
    assert at.min() >= kp.MAX_LAG
    assert at.max() < 600
    assert len(at) == (600 - kp.MAX_LAG) // km.SCREEN_SHARE
    assert len(np.unique(at)) == len(at)


def _zigzag_bits(s: int) -> int:
    """The exact estimate: the bit length of the zigzag of ``s``, plus one; 0 for 0."""
    z = (s << 1) if s >= 0 else (-s << 1) - 1
    return z.bit_length() + 1 if z else 0


def test_residual_bits_is_the_zigzag_bit_length_plus_one() -> None:
    values = [0, 1, -1, 2, -2, 3, -3, 4, -4, 127, -128, 2**21 - 1, -(2**21), 2**22 - 1,
              -(2**22) + 1, 10**6, -(10**6)]
    e = np.array([values], np.int64).view(np.uint64)
    assert kp.residual_bits(e).tolist() == [sum(_zigzag_bits(v) for v in values)]
    one_each = e.reshape(-1, 1)
    assert kp.residual_bits(one_each).tolist() == [_zigzag_bits(v) for v in values]


def test_residual_bits_of_huge_residuals_is_at_most_one_bit_high() -> None:
    values = [2**22, -(2**22), -(2**23), 2**24 + 1, 2**62, -(2**62), 2**63 - 1, -(2**63)]
    got = kp.residual_bits(np.array(values, np.int64).view(np.uint64).reshape(-1, 1))
    exact = [_zigzag_bits(v) for v in values]
    assert all(0 <= g - x <= 1 for g, x in zip(got.tolist(), exact, strict=True))
