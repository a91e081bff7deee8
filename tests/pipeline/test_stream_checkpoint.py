"""A stream's checkpoint: resumed exactly, small enough to save with every window, and
checkpoints saved by earlier versions (``.npz`` archives, deflated or bare) still
resume."""

from __future__ import annotations

import io
import json
import zlib

import numpy as np
import pytest

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
        np.array_equal(a.column(k), b.column(k), equal_nan=a.column("mean").dtype.kind == "f")
        for k in SeriesStream._ARRAYS)


def _npz(stream: SeriesStream) -> bytes:
    """The checkpoint as earlier versions saved it: an ``.npz`` archive."""
    buf = io.BytesIO()
    np.savez(buf, keys=np.array(json.dumps(stream._keys)),
             last_ts_ns=np.array(stream.last_ts_ns, np.int64),
             **{k: stream.column(k) for k in SeriesStream._ARRAYS})
    return buf.getvalue()


def test_a_checkpoint_resumes_the_stream_exactly_and_is_deflated() -> None:
    stream = _stream(5)
    state = stream.snapshot()
    again = SeriesStream.resume("leaf-1", "gnmi", stream.rules, state)
    assert _same(stream, again)
    bare = zlib.decompress(state)
    assert bare.startswith(SeriesStream.STATE_MAGIC)
    assert len(state) * 3 < len(bare)
    assert len(state) < len(zlib.compress(_npz(stream), 1)), "smaller than an .npz"
    again.step(Frame.build("leaf-1", T0 + 5 * 10**9, "gnmi", 5, PORTS * 2,
                           ["in_octets"] * 64 + ["out_octets"] * 64,
                           [5000 + p for p in range(128)]))
    assert again.last_ts_ns == T0 + 5 * 10**9, "the resumed stream goes on"


def test_a_fresh_streams_checkpoint_resumes_with_no_time() -> None:
    stream = SeriesStream("leaf-1", "gnmi", EventRules(EventConfig()))
    again = SeriesStream.resume("leaf-1", "gnmi", stream.rules, stream.snapshot())
    assert again.last_ts_ns is None
    assert _same(stream, again)


@pytest.mark.parametrize("deflated", [True, False], ids=["deflated", "bare"])
def test_an_npz_checkpoint_of_an_earlier_version_still_resumes(deflated: bool) -> None:
    stream = _stream(3)
    archive = _npz(stream)
    state = zlib.compress(archive, 1) if deflated else archive
    assert _same(stream, SeriesStream.resume("leaf-1", "gnmi", stream.rules, state))


@pytest.mark.parametrize("form", ["foss", "npz"])
def test_a_checkpoint_without_series_times_resumes_them_at_the_streams_time(
        form: str) -> None:
    """Checkpoints saved before the bank kept each series' last time (no ``last_ts``
    array) resume with every series last seen at the stream's last time."""
    stream = _stream(3)
    older = [k for k in SeriesStream._ARRAYS if k != "last_ts"]
    if form == "npz":
        buf = io.BytesIO()
        np.savez(buf, keys=np.array(json.dumps(stream._keys)),
                 last_ts_ns=np.array(stream.last_ts_ns, np.int64),
                 **{k: stream.column(k) for k in older})
        state = buf.getvalue()
    else:
        arrays = [stream.column(k) for k in older]
        head = json.dumps({"keys": stream._keys, "last_ts_ns": stream.last_ts_ns,
                           "arrays": [[a.dtype.str, len(a)] for a in arrays]}).encode()
        state = zlib.compress(b"".join((SeriesStream.STATE_MAGIC,
                                        len(head).to_bytes(4, "little"), head,
                                        *(a.tobytes() for a in arrays))))
    again = SeriesStream.resume("leaf-1", "gnmi", stream.rules, state)
    assert _same(stream, again)
    assert (again.column("last_ts") == T0 + 2 * 10**9).all()
