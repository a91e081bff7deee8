"""A tick's frames are made again in place only when nothing outside the twin holds them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fabricops.core.frame import Frame
from fabricops.simulator.engine import Simulator
from fabricops.simulator.frame_pool import FramePool

Make = Callable[..., Simulator]


def _pair(streaming: Make) -> tuple[Simulator, Simulator]:
    """Two twins of one run: the first with its frame pool, the second without."""
    pooled, fresh = streaming(seed=5), streaming(seed=5)
    fresh.telemetry.pool = FramePool(enabled=False)
    return pooled, fresh


def _same_tick(pooled: Simulator, fresh: Simulator) -> list[Frame]:
    pooled.step()
    fresh.step()
    got = pooled.frames()
    assert [f.encode() for f in got] == [f.encode() for f in fresh.frames()]
    return got


def test_frames_dropped_within_the_tick_are_refilled_and_read_as_made_anew(
        streaming: Make) -> None:
    pooled, fresh = _pair(streaming)
    first_ids = {id(f) for f in _same_tick(pooled, fresh)}
    for _ in range(5):
        frames = _same_tick(pooled, fresh)
        assert {id(f) for f in frames} == first_ids  # the same objects, new values
        assert all(not f.raw.flags.writeable for f in frames)
        del frames
    assert (pooled.telemetry.pool.made, pooled.telemetry.pool.refilled) == (1, 5)


def test_nothing_a_consumer_keeps_changes_when_later_ticks_are_made(streaming: Make) -> None:
    pooled, fresh = _pair(streaming)
    kept_frames = _same_tick(pooled, fresh)[3:5]  # two frames of the first tick
    frames_then = [f.encode() for f in kept_frames]
    frames = _same_tick(pooled, fresh)
    kept_values = frames[7].raw  # one value array of the second tick
    values_then = kept_values.copy()
    del frames
    frames = _same_tick(pooled, fresh)
    kept_slice = frames[0].raw[1:]  # a view of a view, of the third tick
    slice_then = kept_slice.copy()
    del frames
    for _ in range(4):
        del _same_tick(pooled, fresh)[:]
    assert [f.encode() for f in kept_frames] == frames_then
    assert np.array_equal(kept_values, values_then)
    assert np.array_equal(kept_slice, slice_then)
    assert pooled.telemetry.pool.made >= 3  # none of the three held ticks was refilled


def test_a_board_keeping_the_last_tick_lets_the_one_before_be_refilled(
        streaming: Make) -> None:
    pooled, fresh = _pair(streaming)
    board: list[Frame] = []
    for _ in range(6):
        board = _same_tick(pooled, fresh)  # the board holds the last tick until the next
    assert len(board) == pooled.fabric.n_nodes
    assert (pooled.telemetry.pool.made, pooled.telemetry.pool.refilled) == (2, 4)


def test_a_stream_still_sending_the_tick_before_the_boards_leaves_the_third_refillable(
        streaming: Make) -> None:
    pooled, fresh = _pair(streaming)
    board: list[Frame] = []
    sending: list[Frame] = []
    for _ in range(8):
        board, sending = _same_tick(pooled, fresh), board  # two ticks held at any time
    assert len(sending) == pooled.fabric.n_nodes
    assert (pooled.telemetry.pool.made, pooled.telemetry.pool.refilled) == (3, 5)


def test_a_consumer_keeping_older_ticks_makes_the_pool_look_rarely_then_refill_again(
        streaming: Make) -> None:
    pooled, fresh = _pair(streaming)
    held = [_same_tick(pooled, fresh) for _ in range(100)]  # a stream sampling slowly
    pool = pooled.telemetry.pool
    assert pool.made == 100
    assert pool.looks <= 12  # after 1, 3, 7 ... up to 63 ticks, not at every tick
    held.clear()  # the consumer lets go: refilling resumes within the longest wait
    for _ in range(70):
        del _same_tick(pooled, fresh)[:]
    assert pool.refilled >= 1
    assert pool.made <= 100 + 64
