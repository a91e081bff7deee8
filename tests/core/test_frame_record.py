"""Frame record, builder and JSON view: round trips, record checks, values, plausibility."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricops.core.catalogue import CATALOGUE, UnknownMetricError
from fabricops.core.frame import Frame, FrameError, Source, decode_many, encode_many
from tests.core.frame_samples import U64_MAX, float_bits, frames, sample_frame

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


def test_frame_equality() -> None:
    assert sample_frame() == sample_frame()
    other = Frame.build("leaf-0-3", 1, "gnmi", 42, ["e"], ["in_octets"], [1])
    assert sample_frame() != other
    assert sample_frame() != "frame"


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
