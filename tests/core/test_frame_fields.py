"""A frame's fields are slots set once: frames made in bulk are whole, read-only frames."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import numpy as np
import pytest

from fabricops.core.frame import Frame, FrameError, Source


def _like() -> Frame:
    return Frame("leaf-1", 1, Source.SIM, 1, ("eth1",), np.zeros(2, np.uint32),
                 np.array([1, 2], np.uint16), np.zeros(2, np.uint64))


def test_frames_made_in_bulk_are_read_only_frames_with_their_own_values() -> None:
    like = _like()
    made = Frame.again_each([like, like], 9, [4, 5], [np.array([3, 4], np.uint64),
                                                       np.array([5, 6], np.uint64)])
    assert [type(f) for f in made] == [Frame, Frame]
    assert [(f.device, f.ts_ns, f.source, f.seq, f.raw.tolist()) for f in made] == [
        ("leaf-1", 9, Source.SIM, 4, [3, 4]), ("leaf-1", 9, Source.SIM, 5, [5, 6])]
    assert made[0] != made[1]
    assert made[0] == Frame.trusted(
        "leaf-1", 9, Source.SIM, 4, like.entities, like.entity_idx, like.metric,
        np.array([3, 4], np.uint64))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[0].seq = 7  # type: ignore[misc]
    with pytest.raises(AttributeError):
        made[0].extra = 1  # type: ignore[attr-defined]
    assert not hasattr(made[0], "__dict__")


def test_a_frame_pickles_copies_and_is_replaced_with_its_checks() -> None:
    frame = _like()
    for twin in (pickle.loads(pickle.dumps(frame)), copy.copy(frame), copy.deepcopy(frame)):
        assert twin == frame
        assert type(twin) is Frame
        assert not twin.raw.flags.writeable
    later = dataclasses.replace(frame, ts_ns=2, seq=2)
    assert (later.ts_ns, later.seq, later.device) == (2, 2, "leaf-1")
    with pytest.raises(FrameError, match="leaf-1"):
        dataclasses.replace(frame, raw=np.zeros(3, np.uint64))
