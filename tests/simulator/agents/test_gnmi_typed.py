"""The target's values, intervals and device clock, without a server: tables of input and
expected output, checked by parsing the bytes with gnmi_pb2."""

from __future__ import annotations

import itertools
import math
from typing import Any

import grpc
import pytest
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.openconfig import OPENCONFIG, parse_path
from fabricops.core.topology import Topology
from fabricops.simulator.agents.gnmi_clock import DeviceClock
from fabricops.simulator.agents.gnmi_encode import LeafTables
from fabricops.simulator.agents.gnmi_stream import (
    MIN_INTERVAL_NS,
    GnmiError,
    StreamState,
    check_encoding,
    subscriptions_of,
)
from fabricops.simulator.agents.gnmi_typed import (
    DECIMAL64,
    DOUBLE,
    ENUMERATION,
    JSON,
    JSON_IETF,
    PROTO,
    UINT64,
    Decimal64Proto,
    LeafType,
    leaf_type,
    value_encoder,
)
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec

MS = 1_000_000
DECIMAL = Decimal64Proto.DECIMAL_VAL


def typed(encoding: int, code: int, digits: int, value: int | float,
          decimal64: Decimal64Proto = Decimal64Proto.DOUBLE_VAL) -> tuple[str, Any]:
    """(TypedValue field, its value) of one encoded value."""
    val = gnmi_pb2.TypedValue.FromString(value_encoder(encoding, decimal64)(code, digits, value))
    kind = val.WhichOneof("value")
    found = getattr(val, kind)
    if kind == "decimal_val":
        return kind, (found.digits, found.precision)
    return kind, found


@pytest.mark.parametrize(("encoding", "code", "digits", "value", "expected"), [
    (PROTO, UINT64, 0, 2**64 - 1, ("uint_val", 2**64 - 1)),
    (JSON, UINT64, 0, 2**64 - 1, ("json_val", b"18446744073709551615")),
    (JSON_IETF, UINT64, 0, 2**64 - 1, ("json_ietf_val", b'"18446744073709551615"')),
    (PROTO, UINT64, 0, 145000.4, ("uint_val", 145000)),  # a queue length kept as a float
    (JSON_IETF, UINT64, 0, 145000.6, ("json_ietf_val", b'"145001"')),
    (PROTO, DECIMAL64, 2, -3.2149, ("double_val", -3.21)),
    (JSON, DECIMAL64, 2, -3.2151, ("json_val", b"-3.22")),
    (JSON_IETF, DECIMAL64, 2, -3.2151, ("json_ietf_val", b'"-3.22"')),
    (JSON_IETF, DECIMAL64, 1, 51.0, ("json_ietf_val", b'"51.0"')),
    (PROTO, ENUMERATION, 0, 2, ("string_val", "DOWN")),
    (JSON, ENUMERATION, 0, 1, ("json_val", b'"UP"')),
    (JSON_IETF, ENUMERATION, 0, 7, ("json_ietf_val", b'"LOWER_LAYER_DOWN"')),
    (PROTO, DOUBLE, 0, 2.5e11, ("double_val", 2.5e11)),
    (JSON_IETF, DOUBLE, 0, 2.5e11, ("json_ietf_val", b"250000000000.0")),
    (JSON_IETF, DECIMAL64, 2, -math.inf, ("json_ietf_val", b'"-Infinity"')),
])
def test_each_yang_type_is_carried_as_the_spec_says(encoding: int, code: int, digits: int,
                                                    value: int | float,
                                                    expected: tuple[str, Any]) -> None:
    assert typed(encoding, code, digits, value) == expected


@pytest.mark.parametrize(("value", "digits", "expected"), [
    (-3.2149, 2, (-321, 2)), (51.66, 1, (517, 1)), (0.004, 2, (0, 2)), (-0.004, 2, (0, 2)),
])
def test_decimal_val_carries_digits_and_precision(value: float, digits: int,
                                                  expected: tuple[int, int]) -> None:
    assert typed(PROTO, DECIMAL64, digits, value, DECIMAL) == ("decimal_val", expected)
    assert typed(PROTO, UINT64, 0, 7, DECIMAL) == ("uint_val", 7)
    assert typed(PROTO, DECIMAL64, 2, math.nan, DECIMAL)[0] == "double_val"


def test_leaf_types_follow_the_openconfig_models() -> None:
    by_name = {m.name: leaf_type(m) for m in CATALOGUE.metrics if m.family.sources.openconfig_path}
    assert by_name["in_octets"] == LeafType(UINT64)
    assert by_name["oper_status"] == LeafType(ENUMERATION)
    assert by_name["queue_depth_bytes"] == LeafType(UINT64)
    assert by_name["rx_power_dbm"] == LeafType(DECIMAL64, 2)
    assert by_name["temperature_c"] == LeafType(DECIMAL64, 1)
    assert by_name["rdma_tx_rate_bps"] == LeafType(DOUBLE)


@pytest.mark.parametrize(("encoding", "code"), [
    (gnmi_pb2.BYTES, grpc.StatusCode.UNIMPLEMENTED),
    (gnmi_pb2.ASCII, grpc.StatusCode.UNIMPLEMENTED),
    (42, grpc.StatusCode.INVALID_ARGUMENT),
])
def test_encodings_the_target_does_not_serve_are_refused(encoding: int,
                                                         code: grpc.StatusCode) -> None:
    with pytest.raises(GnmiError) as err:
        check_encoding(encoding, "leaf-0")
    assert err.value.code is code
    assert "'leaf-0'" in err.value.message
    assert [check_encoding(e, "leaf-0") for e in (JSON, JSON_IETF, PROTO)] == \
        [JSON, JSON_IETF, PROTO]


def test_device_clock_places_device_time_on_the_monotonic_clock() -> None:
    clock = DeviceClock()
    clock.observe(1, 10_000 * MS, 500 * MS)
    assert clock.mono_at(10_100 * MS) is None  # pace unknown from one frame
    clock.observe(2, 11_000 * MS, 1000 * MS)  # 1 device s per 0.5 wall s
    clock.observe(2, 11_000 * MS, 1300 * MS)  # a later stream seeing the same tick
    assert clock.spacing_ns() == 1000 * MS
    assert clock.mono_at(11_100 * MS) == 1050 * MS
    assert clock.mono_at(11_900 * MS) == 1450 * MS
    clock.observe(3, 5_000 * MS, 2000 * MS)  # a clock going back starts over
    assert clock.mono_at(5_100 * MS) is None


def test_a_stream_that_woke_late_still_knows_one_frame_from_the_next() -> None:
    """Ticks 2 to 6 missed: 6 device seconds passed, but frames still come each second,
    so no sample is due between this frame and the next (none goes out twice)."""
    clock = DeviceClock()
    clock.observe(1, 10_000 * MS, 500 * MS)
    clock.observe(7, 16_000 * MS, 6500 * MS)
    assert clock.spacing_ns() == 1000 * MS


def _frames(fabric: Topology, ticks: int, tick_s: float) -> list[Frame]:
    sim = Simulator(fabric, SimConfig(seed=5, tick_s=tick_s))
    sim.add_job(JobSpec(hosts=2, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    out = []
    for _ in range(ticks):
        sim.step()
        out.append(next(f for f in sim.frames() if f.device == "leaf-0"))
    return out


def _sample(path: str, interval_ns: int, **extra: Any) -> Any:
    elems = [gnmi_pb2.PathElem(name=e.name, key=dict(e.keys)) for e in parse_path(path)]
    return gnmi_pb2.SubscriptionList(
        prefix=gnmi_pb2.Path(target="leaf-0"), subscription=[gnmi_pb2.Subscription(
            path=gnmi_pb2.Path(elem=elems), mode=gnmi_pb2.SAMPLE, sample_interval=interval_ns,
            **extra)])


def test_samples_due_between_frames_repeat_the_newest_frame_and_its_timestamp() -> None:
    frames = _frames(leaf_spine(gpus=16), 3, tick_s=1.0)
    counters = "/interfaces/interface[name=eth1]/state/counters/in-octets"
    state = StreamState("leaf-0", subscriptions_of(_sample(counters, 100 * MS), 0),
                        LeafTables(OPENCONFIG))
    sent = [gnmi_pb2.Notification.FromString(state.snapshot(frames[0]) or b"")]
    for previous, frame in itertools.pairwise(frames):
        while (at := state.next_repeat_ns(previous, previous.ts_ns + 1000 * MS)) is not None:
            sent.append(gnmi_pb2.Notification.FromString(state.repeat(previous, at) or b""))
        sent.append(gnmi_pb2.Notification.FromString(state.step(frame) or b""))
    stamps = [n.timestamp for n in sent]
    values = [n.update[0].val.uint_val for n in sent]
    assert len(sent) == 21  # every 100 ms over 2 s, and the first frame
    assert stamps == [frames[0].ts_ns] * 10 + [frames[1].ts_ns] * 10 + [frames[2].ts_ns]
    assert values[1:10] == [values[0]] * 9
    assert values[10] > values[0]


def test_a_sample_every_frame_and_suppress_redundant_send_nothing_between_frames() -> None:
    frames = _frames(leaf_spine(gpus=16), 2, tick_s=1.0)
    path = "/interfaces/interface[name=eth1]/state/oper-status"
    tables = LeafTables(OPENCONFIG)
    for sub_list in (_sample(path, 0), _sample(path, 100 * MS, suppress_redundant=True)):
        state = StreamState("leaf-0", subscriptions_of(sub_list, 0), tables)
        state.snapshot(frames[0])
        repeats = []
        while (at := state.next_repeat_ns(frames[0], frames[1].ts_ns)) is not None:
            repeats.append(state.repeat(frames[0], at))
        assert repeats in ([], [None] * 9)


def test_intervals_below_the_minimum_are_invalid_arguments() -> None:
    path = "/interfaces"
    assert subscriptions_of(_sample(path, MIN_INTERVAL_NS), 0)[0].interval_ns == MIN_INTERVAL_NS
    for sub_list in (_sample(path, MIN_INTERVAL_NS - 1),
                     _sample(path, 0, heartbeat_interval=10 * MS)):
        with pytest.raises(GnmiError) as err:
            subscriptions_of(sub_list, 0, "leaf-0")
        assert err.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert "minimum of 100000000 ns (100 ms)" in err.value.message
