"""Counter to rate: wraps, resets and counters that go backwards."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.pipeline.rates import counter_rates

U = np.uint64


def test_rates_are_deltas_over_the_interval() -> None:
    step = counter_rates(np.array([100, 0, 5], U), np.array([300, 0, 25], U), 2.0)
    assert step.rate.tolist() == [100.0, 0.0, 10.0]
    assert not step.reset
    assert not step.backwards.any()
    assert not step.wrapped.any()


def test_a_wrap_at_2_64_counts_the_bytes_across_it() -> None:
    prev = np.array([2**64 - 10, 50], U)
    step = counter_rates(prev, np.array([5, 60], U), 1.0)
    assert step.wrapped.tolist() == [True, False]
    assert step.rate.tolist() == [15.0, 10.0]


def test_most_counters_dropping_together_is_a_device_reset() -> None:
    step = counter_rates(np.array([1000, 2000, 3000, 0], U), np.array([3, 1, 2, 0], U), 1.0)
    assert step.reset
    assert np.isnan(step.rate).all(), "an interval across a reset has no known rate"


def test_one_counter_going_back_without_a_reset_is_flagged_and_left_unknown() -> None:
    step = counter_rates(np.array([1000, 2000, 3000], U), np.array([1100, 1500, 3100], U), 1.0)
    assert not step.reset
    assert step.backwards.tolist() == [False, True, False]
    assert step.rate[0] == 100.0
    assert np.isnan(step.rate[1])
    assert step.rate[2] == 100.0


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        counter_rates(np.zeros(1, U), np.zeros(1, U), 0.0)
