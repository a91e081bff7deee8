"""The NumPy codecs of frames and INT batches against the protobuf runtime: the same bytes
out, every valid encoding in, and each kind of broken record refused with its cause."""

from __future__ import annotations

import contextlib
import re
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricops.core.bus import Topic
from fabricops.core.frame import Frame, FrameDecodeError, Source
from fabricops.core.intreport import IntBatch, IntDecodeError
from fabricops.core.wire_columns import varint
from fabricops.core.wire_frame import EntityTables
from fabricops.core.wire_schema import enum_numbers, message_class
from tests.collectors.int_samples import COMMON_BITS, random_batch

FRAME = message_class(Topic.TELEMETRY.schema)
INT = message_class(Topic.INT.schema)
SOURCE = enum_numbers(FRAME.DESCRIPTOR.fields_by_name["source"].enum_type, Source)


def sample_frame() -> Frame:
    return Frame.build("leaf-0-3", 1_700_000_000_123_456_789, Source.GNMI, 42,
                       ["leaf-0-3:eth1", "leaf-0-3:eth2", "leaf-0-3:eth1"],
                       ["in_octets", "queue_depth_bytes", "oper_status"], [2**64 - 1, -2.5, 1])


def runtime_frame(f: Frame) -> Any:
    return FRAME(n_samples=f.n_samples, device=f.device, ts_ns=f.ts_ns, source=SOURCE[f.source],
                 seq=f.seq, entities=f.entities, entity_idx=f.entity_idx.tolist(),
                 metric=f.metric.tolist(), raw=f.raw.tolist())


def field(number: int, wt: int, payload: bytes) -> bytes:
    """One field as the wire has it: key, then the payload (with its length if wt is 2)."""
    body = varint(len(payload)) + payload if wt == 2 else payload
    return varint(number << 3 | wt) + body


names = st.text(st.characters(codec="utf-8"), max_size=8)


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    entities = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    n = draw(st.integers(0, 20))
    return Frame(draw(names), draw(st.integers(0, 2**63 - 1)), draw(st.sampled_from(Source)),
                 draw(st.integers(0, 2**63 - 1)), tuple(entities),
                 np.array(draw(st.lists(st.integers(0, len(entities) - 1), min_size=n,
                                        max_size=n)), np.uint32),
                 np.array(draw(st.lists(st.integers(0, 65535), min_size=n, max_size=n)),
                          np.uint16),
                 np.array(draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)),
                          np.uint64))


# ---- frames -------------------------------------------------------------------------

@given(frames())
def test_frame_bytes_are_the_runtime_serializer_bytes(frame: Frame) -> None:
    assert frame.encode() == runtime_frame(frame).SerializeToString()
    assert Frame.decode(runtime_frame(frame).SerializeToString()) == frame


def test_frame_decode_reads_unpacked_split_reordered_fields_and_skips_unknown_ones() -> None:
    frame = sample_frame()
    fixed = [field(7, 5, struct.pack("<I", i)) for i in frame.entity_idx.tolist()]
    metric = frame.metric.astype("<u4").tobytes()
    raw = frame.raw.astype("<u8").tobytes()
    unknown = (field(40, 0, varint(2**63)) + field(41, 1, b"\x01" * 8) + field(42, 2, b"xyz")
               + field(43, 5, b"\x02" * 4) + varint(44 << 3 | 3) + field(1, 0, b"\x05")
               + varint(44 << 3 | 4))
    data = b"".join([
        field(9, 2, raw[:8]), unknown, field(8, 2, metric), *fixed, field(9, 2, raw[8:]),
        field(6, 2, b"leaf-0-3:eth1"), field(6, 2, b"leaf-0-3:eth2"),
        field(5, 0, varint(41)), field(5, 0, varint(42)),  # the last one wins
        field(4, 0, varint(SOURCE[Source.GNMI])), field(3, 0, varint(frame.ts_ns)),
        field(2, 2, b"leaf-0-3"), field(1, 0, varint(3)),
    ])
    parsed = FRAME.FromString(data)
    parsed.DiscardUnknownFields()
    assert parsed == runtime_frame(frame), "the runtime reads it the same"
    assert Frame.decode(data) == frame


def test_every_cut_of_a_frame_is_refused() -> None:
    data = sample_frame().encode()
    for cut in range(len(data)):
        with pytest.raises(FrameDecodeError):
            Frame.decode(data[:cut])


GOOD = sample_frame().encode()


@pytest.mark.parametrize(("data", "cause"), [
    (b"\x08\xff", "truncated varint at offset 1"),
    (b"\x08" + b"\xff" * 10 + b"\x01", "longer than 10 bytes"),
    (b"\x08" + b"\xff" * 9 + b"\x02", "does not fit 64 bits"),
    (b"\x12\x50ab", "field 2: length 80 at offset 2 runs past the end"),
    (b"\x0d\x00\x00\x00\x00", "field 1 at offset 0 has wire type 5, expected 0"),
    (b"\x12\x01", "runs past the end"),
    (field(7, 0, b"\x01"), "field 7 at offset 0 has wire type 0, expected 2 (packed) or 5"),
    (field(7, 2, b"\x00" * 5), "packed length 5 is not a multiple of 4"),
    (b"\x0e", "field 1 at offset 0 has wire type 6, expected 0"),
    (varint(20 << 3 | 7), "field 20 before offset 2 has invalid wire type 7"),
    (b"\x07", "field number 0"),
    (varint(30 << 3 | 3), "group 30 is not closed"),
    (varint(30 << 3 | 3) + varint(31 << 3 | 4), "group 30 closed by the end of group 31"),
    (varint(30 << 3 | 3) * 101, "groups nest more than 100 deep"),
    (field(6, 2, b"\xff") + GOOD, "not UTF-8"),
    (GOOD + field(1, 0, b"\x04"), "n_samples is 4 but the columns hold 3"),
    (GOOD + field(8, 2, struct.pack("<I", 70000)) + field(1, 0, b"\x04")
     + field(7, 5, b"\x00" * 4) + field(9, 1, b"\x00" * 8), "metric id 70000, past 65535"),
    (GOOD + field(4, 0, b"\x09"), "unknown source code 9"),
    (field(2, 2, b"d"), "source missing"),
    (GOOD + field(6, 2, b"leaf-0-3:eth1"), "entities contains duplicates"),
    (GOOD + field(3, 0, varint(-5)), "ts_ns -5 is before the Unix epoch"),
    (GOOD + field(5, 0, varint(2**63)), f"seq {2**63} does not fit"),
])
def test_frame_decode_names_the_defect(data: bytes, cause: str) -> None:
    with pytest.raises(FrameDecodeError, match=re.escape(cause)):
        Frame.decode(data)


def test_frame_decode_keeps_no_view_of_a_mutable_buffer() -> None:
    buf = bytearray(sample_frame().encode())
    frame = Frame.decode(memoryview(buf))
    buf[-8:] = b"\x00" * 8
    assert frame == sample_frame()
    assert not frame.raw.flags.writeable


@given(st.binary(max_size=120))
def test_random_bytes_raise_only_frame_decode_error(data: bytes) -> None:
    for buf in (data, GOOD[:20] + data, GOOD + data):
        with contextlib.suppress(FrameDecodeError):
            frame = Frame.decode(buf)
            assert 0 <= frame.ts_ns < 2**63
            assert frame.seq < 2**63


# ---- INT batches --------------------------------------------------------------------

def sample_batch(n: int = 5, seed: int = 3) -> IntBatch:
    rng = np.random.default_rng(seed)
    return random_batch(rng, n, rng.integers(0, 5, n).tolist(), COMMON_BITS)


def runtime_batch(b: IntBatch) -> Any:
    names = [f.name for f in INT.DESCRIPTOR.fields if f.name not in ("n_reports", "n_hops")]
    return INT(n_reports=b.n_reports, n_hops=b.n_hops,
               **{n: getattr(b, n).tolist() for n in names})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_int_bytes_are_the_runtime_serializer_bytes(seed: int) -> None:
    batch = sample_batch(seed=seed)
    assert batch.encode() == runtime_batch(batch).SerializeToString()
    assert IntBatch.decode(runtime_batch(batch).SerializeToString()) == batch


def test_int_decode_skips_unknown_fields() -> None:
    batch = sample_batch()
    data = field(99, 2, b"a later column") + batch.encode() + field(15, 0, b"\x01")
    assert IntBatch.decode(data) == batch


@pytest.mark.parametrize(("column", "value", "bits"), [
    ("sport", 70_000, 16), ("proto", 256, 8), ("hop_count", 2**16, 16), ("queue_id", 300, 8)])
def test_int_decode_refuses_a_value_wider_than_its_field(column: str, value: int,
                                                          bits: int) -> None:
    message = runtime_batch(sample_batch())
    getattr(message, column)[0] = value
    with pytest.raises(IntDecodeError, match=rf"column {column} holds {value} at \w+ #0, "
                                             rf"wider than its {bits} bits"):
        IntBatch.decode(message.SerializeToString())


def test_int_decode_refuses_counts_that_do_not_match_the_columns() -> None:
    message = runtime_batch(sample_batch())
    message.n_hops += 1
    with pytest.raises(IntDecodeError, match=r"holds \d+ values but n_hops is"):
        IntBatch.decode(message.SerializeToString())


def test_frames_of_a_device_share_its_entity_table_and_are_still_checked() -> None:
    """With ``EntityTables``, a device's unchanged table is one tuple, checked once;
    an index past it or a new table with a duplicate is still refused."""
    tables = EntityTables()
    f = sample_frame()
    first, second = (Frame.decode(f.encode(), tables) for _ in range(2))
    assert first == f
    assert second == f
    assert second.entities is first.entities
    assert not second.raw.flags.writeable
    assert not second.entity_idx.flags.writeable
    past = runtime_frame(f)
    past.entity_idx[0] = 7
    with pytest.raises(FrameDecodeError, match="entity index 7 but there are 2 entities"):
        Frame.decode(past.SerializeToString(), tables)
    dup = runtime_frame(f)
    dup.entities[:] = ["leaf-0-3:eth1", "leaf-0-3:eth1"]
    with pytest.raises(FrameDecodeError, match="duplicates"):
        Frame.decode(dup.SerializeToString(), tables)
    other = Frame.build("leaf-0-3", 1, Source.GNMI, 0, ["leaf-0-3:eth9"], ["in_octets"], [5])
    assert Frame.decode(other.encode(), tables).entities == ("leaf-0-3:eth9",)
