"""gNMI values and timestamps outside what their metric or the store can take are skipped
and counted, never raised; what reaches a frame is always a plausible reading."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.collectors.gnmi_mapping import NotificationMapper
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.openconfig import parse_path

TS = 1_767_225_600_000_000_000
IF = "/interfaces/interface[name=eth12]/state"
QUEUE = "/qos/interfaces/interface[interface-id=eth12]/output/queues/queue[name=3]/state"
OPTIC = "/components/component[name=eth12]/transceiver/physical-channels/channel[index=0]/state"
TEMP = "/components/component[name=eth12]/state/temperature/instant"
GOOD = (f"{IF}/counters/in-octets", {"uint_val": 1})
LEAVES = {  # path -> metric name
    f"{IF}/counters/in-octets": "in_octets",
    f"{IF}/oper-status": "oper_status",
    f"{QUEUE}/instant-queue-len": "queue_depth_bytes",
    f"{OPTIC}/input-power/instant": "rx_power_dbm",
    TEMP: "temperature_c",
}


def path(text: str) -> Any:
    return gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=e.name, key=dict(e.keys))
                               for e in parse_path(text)])


def note(updates: list[tuple[str, Any]], ts: int = TS) -> Any:
    return gnmi_pb2.Notification(
        timestamp=ts, prefix=gnmi_pb2.Path(target="leaf-0"),
        update=[gnmi_pb2.Update(path=path(p), val=v if isinstance(v, gnmi_pb2.TypedValue)
                                else gnmi_pb2.TypedValue(**v)) for p, v in updates])


def samples(frame: Frame | None) -> dict[str, float]:
    assert frame is not None
    return {CATALOGUE.by_id(m).name: v for m, v in
            zip(frame.metric.tolist(), frame.values().tolist(), strict=True)}


OUT_OF_RANGE = [  # (path, TypedValue fields, text the problem names)
    (TEMP, {"double_val": 500.0}, "outside [-60, 200]"),
    (TEMP, {"float_val": -273.0}, "outside [-60, 200]"),
    (TEMP, {"double_val": math.nan}, "nan"),
    (TEMP, {"string_val": "inf"}, "inf"),
    (f"{OPTIC}/input-power/instant", {"decimal_val": gnmi_pb2.Decimal64(digits=-12000,
                                                                        precision=2)},
     "outside [-100, 30]"),
    (f"{OPTIC}/input-power/instant", {"json_ietf_val": b"1e999"}, "inf"),
    (f"{QUEUE}/instant-queue-len", {"double_val": -1.0}, "outside [0, inf]"),
    (f"{IF}/oper-status", {"int_val": 9}, "outside [1, 7]"),
    (f"{IF}/oper-status", {"uint_val": 0}, "outside [1, 7]"),
]


@pytest.mark.parametrize(("leaf", "val", "named"), OUT_OF_RANGE)
def test_an_implausible_reading_is_counted_as_a_bad_value_and_skipped(
        leaf: str, val: dict[str, Any], named: str) -> None:
    mapped = NotificationMapper("leaf-0").map(note([(leaf, val), GOOD]), seq=3, received_ns=1)
    assert (mapped.unmapped, mapped.bad_values, mapped.bad_timestamp) == (0, 1, False)
    assert mapped.errors == {"bad_value": 1}
    assert mapped.problem is not None
    assert f"leaf-0:eth12: {LEAVES[leaf]}: value" in mapped.problem
    assert named in mapped.problem
    assert samples(mapped.frame) == {"in_octets": 1}


@pytest.mark.parametrize("val", [
    {"json_val": b"1" + b"0" * 400},  # a gauge no float can hold
    {"decimal_val": gnmi_pb2.Decimal64(digits=1, precision=4_000_000_000)},
    {"string_val": "1e400000"},
])
def test_values_no_float_holds_are_bad_values_not_errors(val: dict[str, Any]) -> None:
    mapped = NotificationMapper("leaf-0").map(note([(TEMP, val), GOOD]), seq=0, received_ns=1)
    assert mapped.bad_values == 1
    assert samples(mapped.frame) == {"in_octets": 1}


def test_a_notification_of_implausible_readings_only_makes_no_frame() -> None:
    mapped = NotificationMapper("leaf-0").map(
        note([(TEMP, {"double_val": 1e6}), (f"{IF}/oper-status", {"int_val": 0})]),
        seq=0, received_ns=1)
    assert mapped.frame is None
    assert mapped.bad_values == 2


def test_plausible_edges_are_kept() -> None:
    mapped = NotificationMapper("leaf-0").map(note([
        (TEMP, {"double_val": -60.0}), (f"{OPTIC}/input-power/instant", {"double_val": -60.0}),
        (f"{IF}/oper-status", {"string_val": "LOWER_LAYER_DOWN"}),
        (f"{IF}/counters/in-octets", {"uint_val": 2**64 - 1})]), seq=0, received_ns=1)
    assert mapped.errors == {}
    assert samples(mapped.frame) == {"temperature_c": -60.0, "rx_power_dbm": -60.0,
                                     "oper_status": 7, "in_octets": float(2**64 - 1)}


def test_a_negative_timestamp_sets_the_notification_aside() -> None:
    mapped = NotificationMapper("leaf-0").map(note([GOOD], ts=-5), seq=0, received_ns=TS)
    assert mapped.frame is None
    assert mapped.bad_timestamp
    assert not mapped.no_timestamp
    assert mapped.errors == {"bad_timestamp": 1}
    assert mapped.problem == "notification timestamp -5 is outside [0, 2**63) ns"


def test_a_missing_timestamp_is_the_receive_time() -> None:
    mapped = NotificationMapper("leaf-0").map(note([GOOD], ts=0), seq=0, received_ns=TS)
    assert mapped.frame is not None
    assert mapped.frame.ts_ns == TS
    assert mapped.errors == {"no_timestamp": 1}


typed_values = st.one_of(
    st.builds(lambda v: {"uint_val": v}, st.integers(0, 2**64 - 1)),
    st.builds(lambda v: {"int_val": v}, st.integers(-(2**63), 2**63 - 1)),
    st.builds(lambda v: {"double_val": v}, st.floats()),
    st.builds(lambda v: {"float_val": v}, st.floats(width=32)),
    st.builds(lambda v: {"string_val": v}, st.text(max_size=12)),
    st.builds(lambda v: {"json_ietf_val": v}, st.binary(max_size=12)),
    st.builds(lambda v: {"json_val": v.encode()},
              st.from_regex(r"-?[0-9]{1,30}(\.[0-9]+)?(e-?[0-9]{1,4})?", fullmatch=True)),
    st.builds(lambda d, p: {"decimal_val": gnmi_pb2.Decimal64(digits=d, precision=p)},
              st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**32 - 1)),
    st.builds(lambda v: {"bool_val": v}, st.booleans()),
    st.builds(lambda v: {"bytes_val": v}, st.binary(max_size=8)),
)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(sorted(LEAVES)), typed_values), max_size=6),
       st.integers(-(2**63), 2**63 - 1))
def test_any_value_maps_or_is_counted_and_frames_hold_plausible_readings(
        updates: list[tuple[str, dict[str, Any]]], ts: int) -> None:
    mapped = NotificationMapper("leaf-0").map(note(updates, ts=ts), seq=0, received_ns=TS)
    if ts < 0:
        assert mapped.frame is None
        assert mapped.bad_timestamp
        return
    kept = 0 if mapped.frame is None else mapped.frame.n_samples
    distinct = len({p for p, _ in updates})
    assert kept <= distinct
    # a repeated leaf keeps its last value; JSON that is no number may be no JSON at all
    assert mapped.bad_values + mapped.bad_encodings >= distinct - kept
    if mapped.frame is not None:
        assert not mapped.frame.out_of_range().any()
        assert 0 <= mapped.frame.ts_ns < 2**63
        decoded = Frame.decode(mapped.frame.encode())
        assert np.array_equal(decoded.raw, mapped.frame.raw)


def test_list_keys_remember_which_update_paths_name_lists() -> None:
    """``is_list_at`` answers as the schema lookup does, asked once or many times, and
    keeps a bounded memory of the paths it was asked about."""
    from fabricops.collectors import gnmi_values

    keys = gnmi_values.ListKeys(["/interfaces/interface[name=*]/state/counters/in-octets"])
    paths = ["/interfaces/interface", "/openconfig-interfaces:interfaces/interface",
             "/interfaces/interface[name=Ethernet1]/state", "/interfaces", "/qos/interfaces"]
    for _ in range(2):
        assert [keys.is_list_at(parse_path(p)) for p in paths] == [True, True, False, False,
                                                                   False]
    for i in range(gnmi_values._PATHS_MAX + 10):
        keys.is_list_at(parse_path(f"/components/component[name=c{i}]/state"))
    assert len(keys._at) <= gnmi_values._PATHS_MAX
    assert keys.is_list_at(parse_path("/interfaces/interface"))
