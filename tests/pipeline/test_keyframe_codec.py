"""The keyframe block codec (the default format version): round trips, bounds, size, and malformed
payloads."""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricops.core.catalogue import CATALOGUE, MetricKind
from fabricops.pipeline.keyframe import (
    ENCODING,
    ENCODINGS,
    KeyframeDecodeError,
    KeyframeError,
    SeriesBlock,
    decode_block,
    default_gauge_bound,
    encode_block,
    gauge_bounds,
)
from tests.pipeline.keyframe_blocks import COUNTER, GAUGE, STATE, block
from tests.pipeline.keyframe_bytes import SECOND, T0, U64_MAX

CAUSES = re.compile(r"truncated|length mismatch|bad magic|unknown version|checksum|corrupt|"
                    r"malformed|bad counts|unknown flags")


def floats(values: list[float] | np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).view(np.uint64)


def round_trip(b: SeriesBlock, bound: float | np.ndarray = 0.0) -> SeriesBlock:
    return decode_block(encode_block(b, bound))


def test_encoding_name() -> None:
    assert ENCODING == "kf3"


def test_counters_round_trip_bit_exact_through_wraps_resets_and_jumps() -> None:
    wrap = [U64_MAX - 3, U64_MAX, 2, 9, 2**63, 2**63 - 1, 0, 0, U64_MAX, 5]
    rng = np.random.default_rng(3)
    jumps = rng.integers(0, 2**64, 10, dtype=np.uint64)
    steady = np.uint64(2**64 - 50) + np.arange(10, dtype=np.uint64) * np.uint64(7)
    raw = np.vstack([np.array(wrap, np.uint64), jumps, steady])
    b = block([COUNTER] * 3, raw)
    assert round_trip(b) == b


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 5), st.integers(1, 40), st.data())
def test_any_counters_states_and_presence_round_trip(n_series: int, n_points: int,
                                                      data: st.DataObject) -> None:
    values = data.draw(st.lists(st.integers(0, U64_MAX), min_size=n_series * n_points,
                                max_size=n_series * n_points))
    mask = data.draw(st.lists(st.booleans(), min_size=n_series * n_points,
                              max_size=n_series * n_points))
    metric = data.draw(st.lists(st.sampled_from([COUNTER, STATE]), min_size=n_series,
                                max_size=n_series))
    present = np.array(mask).reshape(n_series, n_points)
    raw = np.where(present, np.array(values, np.uint64).reshape(n_series, n_points), 0)
    b = block(metric, raw.astype(np.uint64), present)
    assert round_trip(b) == b


@pytest.mark.parametrize("n_points", [239, 240, 241, 600])
@pytest.mark.parametrize("version", sorted(ENCODINGS))
def test_long_blocks_round_trip_whether_their_modes_are_screened_or_not(
        n_points: int, version: int) -> None:
    """Merged spans are long: their modes are chosen on a sample of the points. Every
    kind of series must still come back exactly (gauges within their bound)."""
    rng = np.random.default_rng(n_points)
    n = n_points
    rising = np.cumsum(rng.integers(0, 10**9, (4, n)), axis=1).astype(np.uint64)
    wrapping = np.uint64(U64_MAX - 10**9) + rising[:1]  # wraps past 2**64 part-way
    reset = rising[1:2].copy()
    reset[0, n // 2:] -= reset[0, n // 2]  # a reboot half-way: the counter restarts at 0
    periodic = np.cumsum(np.tile([0, 900, 20, 880, 5, 0, 700], n // 7 + 1)[:n])[None, :]
    sparse = np.zeros((1, n), np.int64)
    sparse[0, [n // 5, n // 3]] = [3, 1]
    huge = rng.integers(0, 2**64, (1, n), dtype=np.uint64)  # residuals near 2**63
    counters = np.vstack([rising, wrapping, reset, periodic.astype(np.uint64),
                          np.cumsum(sparse, axis=1).astype(np.uint64), huge])
    gauges = np.vstack([floats(40 + rng.normal(0, 0.5, n)), floats(np.full(n, -3.2))])
    states = np.where(np.arange(n) < n // 2, 1, 2).astype(np.uint64)[None, :]
    raw = np.vstack([counters, gauges, states])
    metric = [COUNTER] * len(counters) + [GAUGE] * len(gauges) + [STATE]
    present = rng.random(raw.shape) > 0.02
    b = block(metric, np.where(present, raw, 0).astype(np.uint64), present)
    bounds = gauge_bounds(b.metric)
    got = decode_block(encode_block(b, bounds, version=version))
    exact = np.array(metric) != GAUGE
    assert got.raw[exact].tolist() == b.raw[exact].tolist()
    assert got.present.tolist() == b.present.tolist()
    gauge = ~exact
    error = np.abs(got.raw[gauge].view(np.float64) - b.raw[gauge].view(np.float64))
    assert (error[b.present[gauge]] <= np.repeat(bounds[gauge], n).reshape(-1, n)[
        b.present[gauge]]).all()


def exact_error(decoded: float, original: float) -> Fraction:
    return abs(Fraction(decoded) - Fraction(original))


finite_or_not = st.floats(allow_nan=True, allow_infinity=True, width=64)
bounds = st.one_of(st.just(0.0), st.floats(0.0, 2.0**1000), st.floats(1e-320, 1e-300),
                   st.sampled_from([1e-3, 0.01, 0.1, 0.5, 8.0, 1e6]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(finite_or_not, min_size=12, max_size=12), min_size=1, max_size=4),
       st.lists(bounds, min_size=4, max_size=4))
def test_gauges_stay_within_their_bound(rows: list[list[float]], bound: list[float]) -> None:
    original = np.array(rows)
    per_series = np.array(bound[:len(rows)])
    decoded = round_trip(block([GAUGE] * len(rows), floats(original)), per_series)
    got = decoded.raw.view(np.float64)
    for (i, j), x in np.ndenumerate(original):
        if np.isfinite(x) and per_series[i] > 0:
            assert exact_error(float(got[i, j]), float(x)) <= Fraction(float(per_series[i]))
        else:
            assert decoded.raw[i, j] == floats([x])[0]


def test_gauge_bound_is_met_on_rounding_edges() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, 0.1 + 0.2, 1e-3 * 3, 2.0**52 + 1, 9.007e15])
    for bound in (0.5, 0.25, 1e-3, 0.1, 1.0):
        got = round_trip(block([GAUGE], floats(x)), bound).raw.view(np.float64)[0]
        assert all(exact_error(g, o) <= Fraction(bound) for g, o in zip(got, x, strict=True))


def test_bound_zero_is_lossless_and_nan_inf_are_exact() -> None:
    bits = [0x7FF8000000000001, 0xFFF8000000000000, 0x7FF0000000000000, 0xFFF0000000000000,
            0x8000000000000000, 0x0000000000000001, 0x3FF0000000000000, 0x4045000000000000]
    b = block([GAUGE, GAUGE], np.array([bits, bits[::-1]], np.uint64))
    assert round_trip(b, 0.0) == b
    lossy = round_trip(b, np.array([0.1, 0.0]))
    assert np.array_equal(lossy.raw[0, :4], b.raw[0, :4])
    assert np.array_equal(lossy.raw[1], b.raw[1])


def test_values_out_of_quantizer_range_are_kept_exactly() -> None:
    x = np.array([1e300, -1e300, 1.0, 5e-324, 1e18, 3.0])
    got = round_trip(block([GAUGE], floats(x)), 1e-3).raw.view(np.float64)[0]
    assert got[[0, 1, 4]].tolist() == [1e300, -1e300, 1e18]
    assert np.all(np.abs(got - x) <= 1e-3)


def test_state_changes_land_at_their_exact_indices() -> None:
    state = np.ones(60, np.uint64)
    state[17:23], state[41] = 2, 7
    b = block([STATE, STATE], np.vstack([state, np.full(60, 2, np.uint64)]))
    decoded = round_trip(b)
    assert np.flatnonzero(np.diff(decoded.raw[0].astype(np.int64))).tolist() == [16, 22, 40, 41]
    assert decoded == b


def test_absent_points_stay_absent_and_decode_as_zero() -> None:
    present = np.ones((3, 8), bool)
    present[0, :3] = present[1, 5] = present[2, :] = False
    raw = np.vstack([1000 + np.arange(8, dtype=np.uint64), floats(40.0 + np.arange(8)),
                     np.full(8, 2, np.uint64)])
    b = block([COUNTER, GAUGE, STATE], np.where(present, raw, 0).astype(np.uint64), present)
    decoded = round_trip(b, 0.0)
    assert np.array_equal(decoded.present, present)
    assert (decoded.raw[~present] == 0).all()
    assert decoded == b


def test_all_present_block_stores_no_mask() -> None:
    raw = np.tile(np.arange(0, 600, 10, dtype=np.uint64), (50, 1))
    full = encode_block(block([COUNTER] * 50, raw), 0.0)
    present = np.ones(raw.shape, bool)
    present[7, 30] = False
    holed = encode_block(block([COUNTER] * 50, np.where(present, raw, 0), present), 0.0)
    assert len(full) < len(holed)


def test_constant_rate_counters_cost_well_under_a_tenth_of_a_byte() -> None:
    rng = np.random.default_rng(7)
    start = rng.integers(0, 2**48, 200, dtype=np.uint64)
    rate = rng.integers(0, 2**32, 200, dtype=np.uint64)
    raw = start[:, None] + rate[:, None] * np.arange(600, dtype=np.uint64)
    payload = encode_block(block([COUNTER] * 200, raw), 0.0)
    assert len(payload) / raw.size < 0.03
    assert decode_block(payload).raw.tolist() == raw.tolist()


def test_periodic_traffic_counters_round_trip_and_stay_small() -> None:
    rng = np.random.default_rng(8)
    burst = np.tile(np.array([0, 0, 10_814_827, 1_210_185, 0], np.int64), 120)[None, :]
    steps = burst * rng.integers(1, 9, (100, 1)) + rng.integers(-1, 2, (100, 600)) * (burst > 0)
    raw = (rng.integers(0, 2**40, (100, 1)) + np.cumsum(steps, axis=1)).astype(np.uint64)
    payload = encode_block(block([COUNTER] * 100, raw), 0.0)
    assert len(payload) / raw.size < 0.3
    assert decode_block(payload).raw.tolist() == raw.tolist()


def test_single_point_and_empty_blocks() -> None:
    one = block([COUNTER, GAUGE], np.array([[5], [floats([1.0])[0]]], np.uint64))
    assert round_trip(one) == one
    empty = block([], np.zeros((0, 4), np.uint64))
    assert round_trip(empty) == empty


def test_timestamps_with_jitter_round_trip() -> None:
    ts = T0 + np.cumsum(np.array([0, SECOND + 3, SECOND - 7, 5 * SECOND, 1]))
    b = block([COUNTER], np.arange(5, dtype=np.uint64), ts=ts.astype(np.int64))
    assert np.array_equal(round_trip(b).ts_ns, b.ts_ns)


@pytest.mark.parametrize("bound", [-1.0, float("nan"), float("inf"), 2.0**1001])
def test_bad_bounds_are_refused(bound: float) -> None:
    b = block([GAUGE], floats([1.0, 2.0]))
    with pytest.raises(KeyframeError, match="gauge bound"):
        encode_block(b, bound)
    with pytest.raises(KeyframeError, match="gauge bound"):
        encode_block(b, np.array([bound]))


def test_bounds_of_the_wrong_shape_and_unknown_metrics_are_refused() -> None:
    with pytest.raises(KeyframeError, match="shape"):
        encode_block(block([GAUGE], floats([1.0])), np.array([0.1, 0.1]))
    with pytest.raises(KeyframeError, match="not in the catalogue"):
        encode_block(block([999], np.array([1], np.uint64)), 0.0)


def small_payload() -> tuple[SeriesBlock, bytes]:
    present = np.ones((3, 6), bool)
    present[1, 2] = False
    raw = np.array([[1, 5, 9, 2**64 - 1, 3, 4], [0] * 6, [1, 1, 2, 2, 2, 1]], np.uint64)
    raw[1] = floats([20.0, 20.5, 0.0, float("nan"), 19.9, 21.0])
    b = block([COUNTER, GAUGE, STATE], raw, present)
    return b, encode_block(b, 0.1)


def decode_or_cause(payload: bytes) -> SeriesBlock | str:
    try:
        return decode_block(payload)
    except KeyframeDecodeError as exc:
        return str(exc)


def test_every_truncation_is_refused_with_its_cause() -> None:
    _, payload = small_payload()
    for size in range(len(payload)):
        cause = decode_or_cause(payload[:size])
        assert isinstance(cause, str)
        assert CAUSES.search(cause), cause
    assert "truncated" in str(decode_or_cause(payload[:-1]))


def test_every_single_byte_corruption_is_refused_or_harmless() -> None:
    _, payload = small_payload()
    original = decode_block(payload)
    for i in range(len(payload)):
        for flip in (0x01, 0x80, 0xFF):
            bad = bytearray(payload)
            bad[i] ^= flip
            outcome = decode_or_cause(bytes(bad))
            if isinstance(outcome, str):
                assert CAUSES.search(outcome), outcome
            else:
                assert outcome == original


@pytest.mark.parametrize(("edit", "cause"), [
    (lambda p: b"XXXX" + p[4:], "bad magic"),
    (lambda p: p[:4] + b"\x09" + p[5:], "unknown version"),
    (lambda p: p + b"\x00", "length mismatch"),
    (lambda p: p[:10], "truncated header"),
    (lambda p: p[:-3], "truncated body"),
    (lambda p: p[:6] + b"\x00" + p[7:], "checksum"),
])
def test_malformed_payloads_name_the_cause(edit: object, cause: str) -> None:
    _, payload = small_payload()
    with pytest.raises(KeyframeDecodeError, match=cause):
        decode_block(edit(payload))  # type: ignore[operator]


def test_default_gauge_bounds_follow_units() -> None:
    for m in CATALOGUE.metrics:
        bound = default_gauge_bound(m.id)
        assert (bound > 0) == (m.kind is MetricKind.GAUGE)
    assert default_gauge_bound(CATALOGUE.id_of("rx_power_dbm")) == 0.01
    ids = np.array([COUNTER, GAUGE, STATE], np.uint16)
    assert gauge_bounds(ids).tolist() == [0.0, 0.1, 0.0]
    with pytest.raises(KeyframeError, match="not in the catalogue"):
        gauge_bounds([999])


def test_decoded_block_is_read_only() -> None:
    decoded = round_trip(block([COUNTER], np.arange(4, dtype=np.uint64)))
    with pytest.raises(ValueError, match="read-only"):
        decoded.raw[0, 0] = 1
