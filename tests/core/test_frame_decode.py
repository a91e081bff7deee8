"""Frame decoding: the legacy binary codec it still reads, and the bytes and values it refuses."""

from __future__ import annotations

import contextlib
import re
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricops.core import frame_codec
from fabricops.core.frame import (
    CODEC_VERSION,
    FLAG_IDX_U16,
    Frame,
    FrameDecodeError,
    Source,
    decode_many,
    encode_many,
)
from tests.core.frame_samples import U64_MAX, frames, sample_frame

HEADER_SIZE = 3 + 1 + 1 + 1 + 8 + 8 + 2


# ---- legacy codec (version 1, still read): layout and errors -----------------
# The Protocol Buffers record Frame.encode writes is tested in test_wire_frame.py.

def legacy(frame: Frame) -> bytes:
    return frame_codec.encode(frame)


def test_layout_header() -> None:
    data = legacy(sample_frame())
    assert data[:3] == b"FOF"
    assert data[3] == frame_codec.CODEC_VERSION == 1
    assert CODEC_VERSION == 2
    assert data[5] == FLAG_IDX_U16
    seq, ts_ns = struct.unpack_from("<Qq", data, 6)
    assert (seq, ts_ns) == (42, 1_700_000_000_123_456_789)


def test_more_than_65536_entities_uses_u32_indices() -> None:
    for n_ent, flag, idx_size in ((65536, FLAG_IDX_U16, 2), (65537, 0, 4)):
        ents = tuple(f"e{i}" for i in range(n_ent))
        idx = np.array([0, n_ent - 1, n_ent // 2], np.uint32)
        frame = Frame("d", 1, Source.INT, 2, ents, idx, np.ones(3, np.uint16),
                      np.arange(3, dtype=np.uint64))
        data = legacy(frame)
        assert data[5] == flag
        names = sum(2 + len(e) for e in ents)
        assert len(data) == HEADER_SIZE + 1 + 4 + names + 4 + 3 * (idx_size + 2 + 8)
        assert Frame.decode(data) == frame


def test_every_truncation_raises_frame_decode_error() -> None:
    data = legacy(sample_frame())
    for cut in range(len(data)):
        with pytest.raises(FrameDecodeError):
            Frame.decode(data[:cut])


def test_truncation_message_says_expected_and_present() -> None:
    data = legacy(sample_frame())
    with pytest.raises(FrameDecodeError, match=r"truncated.*needs 48 bytes.*only 42 are present"):
        Frame.decode(data[:-6])


@given(frames(), st.data(), st.sampled_from([Frame.encode, frame_codec.encode]))
def test_corrupted_bytes_raise_only_frame_decode_error(
    frame: Frame, data: st.DataObject, encode: Any,
) -> None:
    buf = bytearray(encode(frame))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    with contextlib.suppress(FrameDecodeError):
        Frame.decode(bytes(buf[:cut]))


def _patched(offset: int, value: bytes) -> bytes:
    data = bytearray(legacy(sample_frame()))
    data[offset:offset + len(value)] = value
    return bytes(data)


ENTITY0 = HEADER_SIZE + len("leaf-0-3") + 4 + 2  # first byte of the first entity name


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"GIF89a", "not a fabricops.telemetry.v2.Frame record"),
        (_patched(3, b"\x07"), "frame codec version 7 is not supported (this build reads 1)"),
        (_patched(4, b"\x09"), "unknown source code 9"),
        (_patched(5, b"\x03"), "unknown flag bits 0x02"),
        (_patched(ENTITY0, b"\xff"), "entity #0 is not valid UTF-8"),
        (_patched(HEADER_SIZE, b"\xc3"), "device name is not valid UTF-8"),
        (legacy(sample_frame()) + b"\x00\x00", "2 trailing bytes"),
        (b"", "source missing"),
        (b"FOF", "truncated"),
    ],
)
def test_decode_errors_name_the_cause(data: bytes, needle: str) -> None:
    with pytest.raises(FrameDecodeError, match=re.escape(needle)):
        Frame.decode(data)


def test_decode_entity_index_out_of_range() -> None:
    frame = sample_frame()
    data = bytearray(legacy(frame))
    idx_at = len(data) - frame.n_samples * (2 + 2 + 8)
    data[idx_at + 2:idx_at + 4] = struct.pack("<H", 9)
    with pytest.raises(FrameDecodeError, match=r"sample #1 has entity index 9.*2 entities"):
        Frame.decode(bytes(data))


def test_decode_u16_flag_with_too_many_entities() -> None:
    data = (b"FOF\x01\x01\x01" + struct.pack("<QqH", 0, 0, 1) + b"d"
            + struct.pack("<I", 65537))
    with pytest.raises(FrameDecodeError, match="65537 entities"):
        Frame.decode(data)


@pytest.mark.parametrize("encode", [Frame.encode, frame_codec.encode])
def test_decode_copies_from_mutable_buffers(encode: Any) -> None:
    buf = bytearray(encode(sample_frame()))
    frame = Frame.decode(memoryview(buf))
    buf[-8:] = b"\x00" * 8
    assert frame == sample_frame()


def test_decode_many_errors_name_the_frame() -> None:
    good = frame_codec.encode_many([sample_frame()])
    with pytest.raises(FrameDecodeError, match=r"batch frame #1 at offset .*length prefix"):
        decode_many(good + b"\x01\x00")
    with pytest.raises(FrameDecodeError, match=r"batch frame #1 .*frame body needs"):
        decode_many(good + good[:-1])
    bad = good[:4] + b"\xff" * 3 + good[7:]
    with pytest.raises(FrameDecodeError, match=r"batch frame #0 .*not a fabricops"):
        decode_many(bad)
    assert decode_many(b"") == []


# ---- values the store cannot keep, and garbage ------------------------------

@given(frames(ts=st.integers(-(2**63), -1)))
def test_decode_rejects_a_time_before_the_epoch(frame: Frame) -> None:
    with pytest.raises(FrameDecodeError, match=rf"ts_ns {frame.ts_ns} is before the Unix epoch"):
        Frame.decode(frame.encode())


@given(frames(seq=st.integers(2**63, U64_MAX)))
def test_decode_rejects_a_seq_the_store_cannot_keep(frame: Frame) -> None:
    with pytest.raises(FrameDecodeError, match=rf"seq {frame.seq} does not fit"):
        Frame.decode(frame.encode())


def test_decode_many_names_the_frame_with_a_bad_time() -> None:
    bad = Frame("leaf-0", -5, Source.GNMI, 1, ("e",), np.zeros(1, np.uint32),
                np.ones(1, np.uint16), np.ones(1, np.uint64))
    with pytest.raises(FrameDecodeError, match=r"batch frame #1 .*ts_ns -5"):
        decode_many(encode_many([sample_frame(), bad]))


@given(st.binary(max_size=200))
def test_random_bytes_raise_only_frame_decode_error(data: bytes) -> None:
    for buf in (data, b"FOF\x01" + data):
        with contextlib.suppress(FrameDecodeError):
            frame = Frame.decode(buf)
            assert 0 <= frame.ts_ns < 2**63
            assert frame.seq < 2**63
