"""SNMP rows whose values their metric cannot take are counted as malformed and skipped,
never raised; what reaches a frame is always a plausible reading."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricops.collectors import snmp_decode as dec
from fabricops.core import snmp_entity_mib as ent
from fabricops.core import snmp_mib as mib
from fabricops.core.catalogue import CATALOGUE

TEMP = mib.SensorKind.TEMPERATURE
RX = mib.SensorKind.RX_POWER


def sensor_tables(kind: mib.SensorKind, raw: int, meta: tuple[int, int, int] | None = None
                  ) -> dict[mib.Oid, dict[mib.Oid, int | bytes]]:
    enc = mib.SENSOR_ENCODING[kind]
    sensor_type, scale, precision = meta or (enc.type, enc.scale, enc.precision)
    idx = (mib.sensor_index(1, kind),)
    return {mib.IF_NAME.oid: {(1,): b"eth1"}, mib.SENSOR_TYPE.oid: {idx: sensor_type},
            mib.SENSOR_SCALE.oid: {idx: scale}, mib.SENSOR_PRECISION.oid: {idx: precision},
            mib.SENSOR_VALUE.oid: {idx: raw}, mib.IF_HC_IN_OCTETS.oid: {(1,): 5},
            ent.PHY_CONTAINED_IN.oid: {idx: 1000},  # in the port's transceiver, entity 1000
            ent.PHY_NAME.oid: {idx: f"eth1 {kind.name}".encode()},
            ent.ALIAS_MAPPING.oid: {(1000, 0): ent.alias_to_if_index(1)}}


def decode(tables: dict[mib.Oid, dict[mib.Oid, int | bytes]]) -> dec.Samples:
    return dec.decode_samples("sw", tables, dec.describe(tables))


def kept(out: dec.Samples) -> dict[str, int | float]:
    return dict(zip(out.metrics, out.values, strict=True))


@pytest.mark.parametrize(("column", "value", "named"), [
    (mib.IF_IN_ERRORS, 2**32, "in_errors of ifIndex 1: value 4294967296 is outside "
                              "[0, 4294967295]"),
    (mib.IF_HC_IN_OCTETS, 2**64, "in_octets of ifIndex 1: value 18446744073709551616"),
    (mib.IF_HC_IN_OCTETS, -1, "outside"),
    (mib.IF_OPER_STATUS, 0, "oper_status of ifIndex 1: value 0 is outside [1, 7]"),
    (mib.IF_OPER_STATUS, 8, "outside [1, 7]"),
    (mib.IF_OPER_STATUS, b"up", "b'up' is not a number"),
])
def test_a_row_its_metric_cannot_take_is_malformed(column: mib.Column, value: int | bytes,
                                                   named: str) -> None:
    tables: dict[mib.Oid, dict[mib.Oid, int | bytes]] = {
        mib.IF_NAME.oid: {(1,): b"eth1"}, mib.IF_HC_OUT_OCTETS.oid: {(1,): 9}}
    tables[column.oid] = {(1,): value}
    out = decode(tables)
    assert out.malformed == 1
    assert out.problem is not None
    assert named in out.problem
    assert kept(out) == {"out_octets": 9}


def test_counters_at_the_top_of_their_width_are_kept_and_carried() -> None:
    tables: dict[mib.Oid, dict[mib.Oid, int | bytes]] = {
        mib.IF_NAME.oid: {(1,): b"eth1"}, mib.IF_IN_ERRORS.oid: {(1,): 2**32 - 1},
        mib.IF_HC_IN_OCTETS.oid: {(1,): 2**64 - 1}, mib.IF_OPER_STATUS.oid: {(1,): 7}}
    out = decode(tables)
    assert (out.malformed, out.problem) == (0, None)
    update = dec.CounterTracker().update(out)
    frame = dec.build_frame("sw", 1, 1, out, update.values)
    assert not frame.out_of_range().any()


@pytest.mark.parametrize(("kind", "raw", "meta", "named"), [
    (TEMP, 500_000, None, "gives 500, outside [-60, 200]"),
    (TEMP, -100_000, None, "gives -100, outside [-60, 200]"),
    (RX, 10, (mib.SensorType.WATTS, mib.UNITS_SCALE, 0), "gives 40, outside [-100, 30]"),
    (RX, 1, (mib.SensorType.WATTS, 1, 0), "gives -210, outside"),
])
def test_a_sensor_reading_outside_its_range_is_malformed(
        kind: mib.SensorKind, raw: int, meta: tuple[int, int, int] | None, named: str) -> None:
    out = decode(sensor_tables(kind, raw, meta))
    assert out.malformed == 1
    assert out.problem is not None
    assert named in out.problem
    assert kept(out) == {"in_octets": 5}


@pytest.mark.parametrize(("meta", "reason"), [
    ((mib.SensorType.CELSIUS, 200, 0), "sensor_scale_out_of_range"),  # 10**573: no float
    ((mib.SensorType.CELSIUS, 9, -400), "sensor_scale_out_of_range"),
    ((99, 9, 0), "port_sensor_without_metric"),  # a sensor type with no catalogue unit
])
def test_a_sensor_that_cannot_be_read_is_left_out_at_describe_and_counted(
        meta: tuple[int, int, int], reason: str) -> None:
    tables = sensor_tables(TEMP, 1, meta)
    desc = dec.describe(tables)
    assert desc.sensors.unmapped == {reason: 1}
    out = dec.decode_samples("sw", tables, desc)
    assert (out.malformed, kept(out)) == (0, {"in_octets": 5})


def test_a_dark_receiver_is_a_plausible_reading() -> None:
    out = decode(sensor_tables(RX, 0))
    assert out.malformed == 0
    assert kept(out)["rx_power_dbm"] == mib.DARK_DBM


row_values = st.one_of(st.integers(-(2**70), 2**70), st.integers(-5, 10), st.binary(max_size=4))
indices = st.one_of(st.tuples(st.integers(0, 4)),
                    st.tuples(st.integers(0, 4), st.integers(0, 9)), st.just(()))
COLUMNS = [*dec.PORT_COLUMNS, mib.PRIO_REQUESTS, mib.PFC_REQUESTS, mib.SENSOR_VALUE]


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(COLUMNS), st.dictionaries(indices, row_values,
                                                                 max_size=4), max_size=6),
       st.lists(st.tuples(st.integers(0, 4), st.sampled_from(list(mib.SensorKind)),
                          st.integers(-500, 500), st.integers(-500, 500),
                          st.integers(-500, 500)), max_size=3))
def test_any_rows_decode_track_and_frame_without_raising(
        rows: dict[mib.Column, dict[mib.Oid, int | bytes]],
        sensors: list[tuple[int, mib.SensorKind, int, int, int]]) -> None:
    tables: dict[mib.Oid, dict[mib.Oid, int | bytes]] = {c.oid: r for c, r in rows.items()}
    tables[mib.IF_NAME.oid] = {(i,): f"eth{i}".encode() for i in range(5)}
    for port, kind, sensor_type, scale, precision in sensors:
        idx = (mib.sensor_index(port, kind),)
        for col, value in ((mib.SENSOR_TYPE, sensor_type), (mib.SENSOR_SCALE, scale),
                           (mib.SENSOR_PRECISION, precision)):
            tables.setdefault(col.oid, {})[idx] = value
    out = decode(tables)
    tracker = dec.CounterTracker()
    for _ in range(2):
        update = tracker.update(out)
        if out.entities:
            frame = dec.build_frame("sw", 1, 1, out, update.values)
            assert not frame.out_of_range().any()
    assert all(v in CATALOGUE.by_name(m).valid for m, v in zip(out.metrics, out.values,
                                                                strict=True))


@given(st.binary(max_size=120))
def test_random_datagrams_raise_only_snmp_decode_error(data: bytes) -> None:
    with contextlib.suppress(dec.SnmpDecodeError):
        dec.decode_response(data)
    with contextlib.suppress(dec.SnmpDecodeError):
        dec.decode_response(b"\x30" + bytes([len(data)]) + data if len(data) < 128 else data)
