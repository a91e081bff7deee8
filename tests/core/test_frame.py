"""Frame record, builder, JSON view, and the legacy binary codec it still reads."""

from __future__ import annotations

import contextlib
import json
import re
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricops.core import frame_codec
from fabricops.core.catalogue import CATALOGUE, UnknownMetricError
from fabricops.core.frame import (
    CODEC_VERSION,
    FLAG_IDX_U16,
    Frame,
    FrameDecodeError,
    FrameError,
    Source,
    decode_many,
    encode_many,
)

U64_MAX = 2**64 - 1
KNOWN_IDS = [m.id for m in CATALOGUE.metrics]
GAUGE_IDS = [m.id for m in CATALOGUE.metrics if CATALOGUE.is_float[m.id]]
COUNTER_IDS = [m.id for m in CATALOGUE.metrics if not CATALOGUE.is_float[m.id]]
NAN_BITS = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF4DEADBEEF0001]
HEADER_SIZE = 3 + 1 + 1 + 1 + 8 + 8 + 2


def sample_frame() -> Frame:
    return Frame.build(
        "leaf-0-3", 1_700_000_000_123_456_789, Source.GNMI, 42,
        ["leaf-0-3:eth1", "leaf-0-3:eth2", "leaf-0-3:eth1", "leaf-0-3:eth2"],
        ["in_octets", "queue_depth_bytes", "pfc_rx_pause{prio=3}", "oper_status"],
        [U64_MAX, -12.5, 7, 1],
    )


def float_bits(x: float) -> int:
    return int(np.array([x], dtype=np.float64).view(np.uint64)[0])


# ---- strategies -------------------------------------------------------------

names = st.text(st.characters(codec="utf-8"), max_size=12)
metric_ids = st.one_of(st.sampled_from(KNOWN_IDS), st.sampled_from([0, 14, 99, 65535]))
raw_values = st.one_of(
    st.integers(0, U64_MAX),
    st.integers(U64_MAX - 16, U64_MAX),
    st.sampled_from(NAN_BITS),
    st.floats(allow_nan=True, allow_infinity=True).map(float_bits),
)


STORABLE_TS = st.integers(0, 2**63 - 1)
STORABLE_SEQ = st.integers(0, 2**63 - 1)


@st.composite
def frames(draw: st.DrawFn, ts: st.SearchStrategy[int] = STORABLE_TS,
           seq: st.SearchStrategy[int] = STORABLE_SEQ) -> Frame:
    """Frames ``decode`` accepts (by default): every value the store can keep."""
    entities = draw(st.lists(names, min_size=1, max_size=6, unique=True))
    n = draw(st.integers(0, 40))
    idx = draw(st.lists(st.integers(0, len(entities) - 1), min_size=n, max_size=n))
    mets = draw(st.lists(metric_ids, min_size=n, max_size=n))
    raw = draw(st.lists(raw_values, min_size=n, max_size=n))
    return Frame(
        device=draw(names), ts_ns=draw(ts),
        source=draw(st.sampled_from(list(Source))), seq=draw(seq),
        entities=tuple(entities), entity_idx=np.array(idx, dtype=np.uint32),
        metric=np.array(mets, dtype=np.uint16), raw=np.array(raw, dtype=np.uint64),
    )


# ---- round trips ------------------------------------------------------------

@given(frames())
def test_codec_round_trip(frame: Frame) -> None:
    data = frame.encode()
    assert Frame.decode(data) == frame
    assert Frame.decode(memoryview(data)) == frame


@given(frames(ts=st.integers(-(2**63), 2**63 - 1), seq=st.integers(0, U64_MAX)))
def test_json_dict_round_trip(frame: Frame) -> None:
    assert Frame.from_json_dict(frame.to_json_dict()) == frame


@given(st.lists(frames(), max_size=4))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_encode_many_round_trip(batch: list[Frame]) -> None:
    assert decode_many(encode_many(batch)) == batch


@given(
    counters=st.lists(st.integers(U64_MAX - 1000, U64_MAX) | st.integers(0, 2**63), max_size=20),
    gauges=st.lists(st.floats(allow_nan=False) | st.just(-0.0), max_size=20),
)
def test_build_stores_counters_exactly_and_gauges_as_bits(
    counters: list[int], gauges: list[float]
) -> None:
    mets = ["in_octets"] * len(counters) + ["temperature_c"] * len(gauges)
    ents = [f"leaf-0:eth{i}" for i in range(len(mets))]
    frame = Frame.build("leaf-0", 1, "sim", 0, ents, mets, [*counters, *gauges])
    assert frame.raw[: len(counters)].tolist() == counters
    assert frame.raw[len(counters):].tolist() == [float_bits(g) for g in gauges]
    assert Frame.decode(frame.encode()) == frame
    text = json.dumps(frame.to_json_dict())
    assert Frame.from_json_dict(json.loads(text)) == frame


def test_json_view_is_readable() -> None:
    doc = sample_frame().to_json_dict()
    assert doc["device"] == "leaf-0-3"
    assert doc["source"] == "gnmi"
    assert doc["samples"][0] == {"entity": "leaf-0-3:eth1", "metric": "in_octets",
                                 "value": U64_MAX}
    assert doc["samples"][1]["value"] == -12.5
    assert doc["samples"][2]["metric"] == "pfc_rx_pause{prio=3}"
    assert isinstance(doc["samples"][3]["value"], int)
    assert "entities" not in doc


def test_json_unknown_metric_uses_hash_id() -> None:
    frame = Frame("d", 0, Source.SIM, 0, ("e",), np.zeros(1, np.uint32),
                  np.array([999], np.uint16), np.array([5], np.uint64))
    doc = frame.to_json_dict()
    assert doc["samples"][0]["metric"] == "#999"
    assert Frame.from_json_dict(doc) == frame


def test_json_keeps_a_non_canonical_entity_table() -> None:
    frame = Frame("d", 0, Source.SIM, 0, ("unused", "b", "a"), np.array([2, 1], np.uint32),
                  np.array([1, 2], np.uint16), np.array([5, 6], np.uint64))
    doc = frame.to_json_dict()
    assert doc["entities"] == ["unused", "b", "a"]
    assert Frame.from_json_dict(doc) == frame


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"device": 3}, "'device'"),
        ({"source": "carrier-pigeon"}, "carrier-pigeon"),
        ({"seq": -1}, "seq"),
        ({"bogus": 1}, "bogus"),
        ({"samples": [{"entity": "e", "metric": "nope", "value": 1}]}, "nope"),
        ({"samples": [{"entity": "e", "metric": "in_octets", "value": 1.5}]}, "in_octets"),
        ({"samples": [{"entity": "e", "metric": "#x", "value": 1}]}, "#x"),
        ({"samples": [{"entity": "e"}]}, "sample #0"),
    ],
)
def test_from_json_dict_rejects_bad_documents(change: dict[str, Any], needle: str) -> None:
    doc = {**sample_frame().to_json_dict(), **change}
    with pytest.raises((FrameError, UnknownMetricError), match=".*" + re.escape(needle)):
        Frame.from_json_dict(doc)


# ---- record checks, builder, values -----------------------------------------

def test_post_init_checks_lengths_and_dtypes() -> None:
    i, m, r = np.zeros(2, np.uint32), np.zeros(2, np.uint16), np.zeros(2, np.uint64)
    with pytest.raises(FrameError, match=r"'sw1'.*array lengths differ"):
        Frame("sw1", 0, Source.SIM, 0, ("e",), i, m, r[:1])
    with pytest.raises(FrameError, match=r"'sw1'.*metric must be a 1-d uint16 array, got int64"):
        Frame("sw1", 0, Source.SIM, 0, ("e",), i, m.astype(np.int64), r)
    with pytest.raises(FrameError, match=r"'sw1'.*entity index 3"):
        Frame("sw1", 0, Source.SIM, 0, ("e",), i + 3, m, r)
    with pytest.raises(FrameError, match="duplicates"):
        Frame("sw1", 0, Source.SIM, 0, ("e", "e"), i, m, r)
    with pytest.raises(FrameError, match="seq"):
        Frame("sw1", 0, Source.SIM, -1, ("e",), i, m, r)


def test_arrays_are_read_only_views() -> None:
    raw = np.array([1, 2], np.uint64)
    frame = Frame("d", 0, "sim", 0, ("e",), np.zeros(2, np.uint32),  # type: ignore[arg-type]
                  np.ones(2, np.uint16), raw)
    assert frame.source is Source.SIM
    assert not frame.raw.flags.writeable
    assert raw.flags.writeable


def test_values_and_unknown_metrics() -> None:
    frame = sample_frame()
    assert frame.n_samples == 4
    np.testing.assert_array_equal(frame.values(), [float(U64_MAX), -12.5, 7.0, 1.0])
    assert not frame.unknown_metrics().any()
    odd = Frame("d", 0, Source.SIM, 0, ("e",), np.zeros(3, np.uint32),
                np.array([1, 14, 60000], np.uint16), np.array([3, 4, 5], np.uint64))
    assert odd.unknown_metrics().tolist() == [False, True, True]
    assert odd.values().tolist() == [3.0, 4.0, 5.0]


def test_build_accepts_ids_and_arrays() -> None:
    ids = np.array([CATALOGUE.id_of("in_octets"), CATALOGUE.id_of("rx_power_dbm")])
    frame = Frame.build("d", 0, "snmp", 0, ["a", "b"], ids, np.array([10.0, -3.25]))
    assert frame.raw[0] == 10
    assert frame.values().tolist() == [10.0, -3.25]
    assert frame.entities == ("a", "b")


def test_build_unknown_metric_name_raises_naming_it() -> None:
    with pytest.raises(UnknownMetricError, match="no_such_metric"):
        Frame.build("d", 0, "sim", 0, ["e"], ["no_such_metric"], [1])
    with pytest.raises(UnknownMetricError, match="14"):
        Frame.build("d", 0, "sim", 0, ["e"], [14], [1])


@pytest.mark.parametrize("bad", [1.5, -1, 2**64, float("nan"), "7"])
def test_build_rejects_inexact_counter_values(bad: object) -> None:
    with pytest.raises(FrameError, match=r"sample #1 \(in_octets\)"):
        Frame.build("d", 0, "sim", 0, ["e", "e"], ["in_octets"] * 2, [1, bad])  # type: ignore[list-item]


def test_build_rejects_mismatched_columns() -> None:
    with pytest.raises(FrameError, match="per sample"):
        Frame.build("d", 0, "sim", 0, ["e"], ["in_octets", "out_octets"], [1, 2])


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


def test_frame_equality() -> None:
    assert sample_frame() == sample_frame()
    other = Frame.build("leaf-0-3", 1, "gnmi", 42, ["e"], ["in_octets"], [1])
    assert sample_frame() != other
    assert sample_frame() != "frame"


# ---- values the store cannot keep, garbage and plausibility -----------------

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


def test_out_of_range_flags_implausible_readings_but_no_counter() -> None:
    names = ["in_octets", "in_octets", "oper_status", "oper_status", "oper_status",
             "temperature_c", "temperature_c", "temperature_c", "rx_power_dbm",
             "rx_power_dbm", "queue_depth_bytes", "queue_depth_bytes"]
    gauges = [45.0, float("nan"), 250.0, -60.0, float("-inf"), 0.0, -1.0]
    raw = [0, U64_MAX, 1, 0, 8, *(float_bits(g) for g in gauges)]
    frame = Frame("d", 0, Source.SIM, 0, ("e",), np.zeros(len(raw), np.uint32),
                  np.array([CATALOGUE.id_of(n) for n in names], np.uint16),
                  np.array(raw, np.uint64))
    assert frame.out_of_range().tolist() == [False, False, False, True, True, False, True, True,
                                             False, True, False, True]


def test_out_of_range_leaves_unknown_metrics_to_unknown_metrics() -> None:
    frame = Frame("d", 0, Source.SIM, 0, ("e",), np.zeros(2, np.uint32),
                  np.array([14, 65535], np.uint16),
                  np.array([float_bits(float("nan")), 0], np.uint64))
    assert frame.out_of_range().tolist() == [False, False]
    assert frame.unknown_metrics().tolist() == [True, True]


def test_again_is_the_same_layout_at_another_time_with_other_values() -> None:
    first = Frame.build("leaf-0", 1_000, Source.SIM, 1, ["leaf-0:eth1", "leaf-0:eth2"],
                        ["in_octets", "oper_status"], [5, 1])
    raw = np.array([9, 2], np.uint64)
    raw.flags.writeable = False
    later = first.again(2_000, 2, raw)
    assert later == Frame("leaf-0", 2_000, Source.SIM, 2, first.entities, first.entity_idx,
                          first.metric, raw)
    assert (first.ts_ns, first.seq, first.raw.tolist()) == (1_000, 1, [5, 1])
    assert later.entity_idx is first.entity_idx


def test_again_each_is_again_for_each_layout_with_its_own_values() -> None:
    likes = [Frame.build(f"leaf-{i}", 1_000, Source.SIM, 1, [f"leaf-{i}:eth1"] * 2,
                         ["in_octets", "oper_status"], [5, 1]) for i in range(3)]
    raws = [np.array([10 * i, 2], np.uint64) for i in range(3)]
    for raw in raws:
        raw.flags.writeable = False
    each = Frame.again_each(likes, 2_000, [7, 8, 9], raws)
    assert each == [like.again(2_000, seq, raw)
                    for like, seq, raw in zip(likes, [7, 8, 9], raws, strict=True)]
    assert [f.device for f in each] == ["leaf-0", "leaf-1", "leaf-2"]
    assert [f.raw.tolist() for f in each] == [[0, 2], [10, 2], [20, 2]]
    assert (likes[0].ts_ns, likes[0].seq, likes[0].raw.tolist()) == (1_000, 1, [5, 1])
    with pytest.raises(ValueError, match="shorter"):
        Frame.again_each(likes, 2_000, [7, 8], raws)
