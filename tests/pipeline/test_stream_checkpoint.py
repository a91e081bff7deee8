"""A stream's checkpoint: resumed exactly, small enough to save with every window, and
checkpoints saved by earlier versions (bare ``.npz`` archives) still resume."""

from __future__ import annotations

import io
import zlib

import numpy as np

from fabricops.core.frame import Frame
from fabricops.pipeline.events import EventConfig, EventRules
from fabricops.pipeline.stream import SeriesStream

T0 = 1_800_000_000 * 10**9
PORTS = [f"leaf-1:eth{p}" for p in range(64)]


def _stream(seconds: int) -> SeriesStream:
    stream = SeriesStream("leaf-1", "gnmi", EventRules(EventConfig()))
    for s in range(seconds):
        stream.step(Frame.build("leaf-1", T0 + s * 10**9, "gnmi", s,
                                PORTS * 2, ["in_octets"] * 64 + ["out_octets"] * 64,
                                [1000 * s + p for p in range(128)]))
    return stream


def _same(a: SeriesStream, b: SeriesStream) -> bool:
    return a.last_ts_ns == b.last_ts_ns and a._keys == b._keys and all(
        np.array_equal(getattr(a, k), getattr(b, k), equal_nan=a.mean.dtype.kind == "f")
        for k in SeriesStream._ARRAYS)


def test_a_checkpoint_resumes_the_stream_exactly_and_is_deflated() -> None:
    stream = _stream(5)
    state = stream.snapshot()
    again = SeriesStream.resume("leaf-1", "gnmi", stream.rules, state)
    assert _same(stream, again)
    bare = zlib.decompress(state)
    assert bare[:2] == b"PK", "a deflated .npz archive"
    assert len(state) * 4 < len(bare)


def test_a_bare_npz_checkpoint_of_an_earlier_version_still_resumes() -> None:
    stream = _stream(3)
    bare = zlib.decompress(stream.snapshot())
    np.load(io.BytesIO(bare)).close()  # a plain archive, as earlier versions saved
    assert _same(stream, SeriesStream.resume("leaf-1", "gnmi", stream.rules, bare))
