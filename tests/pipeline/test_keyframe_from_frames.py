"""Series blocks built from frames, and the blocks the keyframe codec refuses to build."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.core.frame import Frame, Source
from fabricops.pipeline.keyframe import KeyframeError, SeriesBlock, block_from_frames
from tests.pipeline.keyframe_blocks import COUNTER, GAUGE
from tests.pipeline.keyframe_bytes import SECOND, T0


def frame(device: str, ts: int, entities: list[str], metrics: list[str],
          values: list[float | int]) -> Frame:
    return Frame.build(device, T0 + ts * SECOND, Source.GNMI, ts, entities, metrics, values)


def test_block_from_frames_sorts_unions_and_keeps_first() -> None:
    frames = [
        frame("leaf-0", 2, ["eth1", "eth2"], ["in_octets", "in_octets"], [30, 300]),
        frame("leaf-0", 0, ["eth1"], ["in_octets"], [10]),
        frame("leaf-0", 1, ["eth1", "eth1", "eth1"], ["in_octets", "temperature_c",
                                                     "in_octets"], [20, 41.5, 99]),
        frame("leaf-0", 1, ["eth1"], ["in_octets"], [777]),
    ]
    b = block_from_frames(frames)
    assert b.ts_ns.tolist() == [T0, T0 + SECOND, T0 + 2 * SECOND]
    assert list(zip(b.entity, b.metric.tolist(), strict=True)) == [
        ("eth1", COUNTER), ("eth1", GAUGE), ("eth2", COUNTER)]
    assert b.raw[0].tolist() == [10, 20, 30]
    assert b.present.tolist() == [[True, True, True], [False, True, False],
                                  [False, False, True]]
    assert b.raw[1].view(np.float64)[1] == 41.5
    assert b.raw[2].tolist() == [0, 0, 300]


def test_block_from_frames_of_one_layout_holds_each_frame_as_a_column() -> None:
    """The usual window: every frame the same layout (equal columns, not the same
    objects), any order; and one layout that repeats a sample keeps the first."""
    ents, metrics = ["eth1", "eth1", "eth2"], ["in_octets", "temperature_c", "in_octets"]
    frames = [frame("leaf-0", t, ents, metrics, [10 * t, 40.0 + t, 100 * t]) for t in (2, 0, 1)]
    b = block_from_frames(frames)
    assert b.ts_ns.tolist() == [T0, T0 + SECOND, T0 + 2 * SECOND]
    assert list(zip(b.entity, b.metric.tolist(), strict=True)) == [
        ("eth1", COUNTER), ("eth1", GAUGE), ("eth2", COUNTER)]
    assert b.raw[0].tolist() == [0, 10, 20]
    assert b.raw[1].view(np.float64).tolist() == [40.0, 41.0, 42.0]
    assert b.raw[2].tolist() == [0, 100, 200]
    assert b.present.all()
    twice = [frame("leaf-0", t, ["eth1", "eth1"], ["in_octets", "in_octets"], [t, 99])
             for t in (0, 1)]
    again = block_from_frames(twice)
    assert again.entity == ("eth1",)
    assert again.raw.tolist() == [[0, 1]]


def test_block_from_frames_refuses_mixed_devices_and_no_frames() -> None:
    with pytest.raises(KeyframeError, match="mixed"):
        block_from_frames([frame("a", 0, ["e"], ["in_octets"], [1]),
                           frame("b", 1, ["e"], ["in_octets"], [1])])
    with pytest.raises(KeyframeError, match="no frames"):
        block_from_frames([])


@pytest.mark.parametrize(("change", "message"), [
    ({"ts_ns": np.array([5, 5], np.int64)}, "strictly increasing"),
    ({"ts_ns": np.array([5.0, 6.0])}, "ts_ns must be"),
    ({"raw": np.zeros((1, 3), np.uint64)}, "raw has shape"),
    ({"present": np.ones((1, 2), np.int8)}, "present must be"),
    ({"entity": ("a", "b")}, "entity must be"),
    ({"ts_ns": np.zeros(0, np.int64)}, "points"),
])
def test_bad_blocks_are_refused(change: dict[str, object], message: str) -> None:
    fields = {"ts_ns": np.array([5, 6], np.int64), "entity": ("a",),
              "metric": np.array([COUNTER], np.uint16), "raw": np.zeros((1, 2), np.uint64),
              "present": np.ones((1, 2), bool)} | change
    with pytest.raises(KeyframeError, match=message):
        SeriesBlock(**fields)  # type: ignore[arg-type]


def test_block_from_frames_with_layouts_that_come_and_go_keeps_each_sample() -> None:
    """Frames of one layout are placed together; a layout that returns after another
    one is placed again, and each sample lands on its own series and point."""
    a = (["eth1", "eth2"], ["in_octets", "in_octets"])
    b = (["eth2", "eth1", "eth3"], ["in_octets", "temperature_c", "in_octets"])
    frames = [frame("leaf-0", t, *(a if t in (0, 1, 4) else b),
                    [t * 10, t * 100] if t in (0, 1, 4) else [t * 100, 40.0 + t, t * 1000])
              for t in range(5)]
    blk = block_from_frames(frames)
    rows = {(e, int(m)): i for i, (e, m) in enumerate(zip(blk.entity, blk.metric, strict=True))}
    assert blk.raw[rows["eth1", COUNTER]].tolist() == [0, 10, 0, 0, 40]
    assert blk.raw[rows["eth2", COUNTER]].tolist() == [0, 100, 200, 300, 400]
    assert blk.raw[rows["eth3", COUNTER]].tolist() == [0, 0, 2000, 3000, 0]
    assert blk.raw[rows["eth1", GAUGE]].view(np.float64)[2:4].tolist() == [42.0, 43.0]
    assert blk.present[rows["eth1", GAUGE]].tolist() == [False, False, True, True, False]
    assert blk.present[rows["eth1", COUNTER]].tolist() == [True, True, False, False, True]
