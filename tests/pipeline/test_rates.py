"""Counter to rate: wraps, resets and counters that go backwards."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.pipeline.rates import counter_rates, frame_rates

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


def test_a_reset_is_judged_per_frame_when_frames_are_taken_together() -> None:
    """Frame 0's device reset its counters; frame 1's has one counter going back. Taken
    together, only frame 0 is a reset, and frame 1 keeps its other rates; a counter
    with no previous value (not known) has no rate and counts for nothing."""
    prev = np.array([1000, 2000, 3000, 1000, 2000, 3000, 9], U)
    cur = np.array([3, 1, 2, 1100, 1500, 3100, 1], U)
    frame = np.array([0, 0, 0, 1, 1, 1, 1], np.intp)
    known = np.array([True] * 6 + [False])
    step = frame_rates(prev, cur, np.array([1.0] * 3 + [2.0] * 4), frame, 2, known)
    assert step.reset.tolist() == [True, False]
    assert step.backwards.tolist() == [False] * 4 + [True, False, False]
    assert np.isnan(step.rate[:3]).all()
    assert step.rate[[3, 5]].tolist() == [50.0, 50.0]
    assert np.isnan(step.rate[[4, 6]]).all()
