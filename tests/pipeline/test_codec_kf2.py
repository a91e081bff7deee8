"""Keyframe format version 2 (entropy-coded residuals, rate mode) beside version 1:
exact counters, bounded gauges, old payloads, and malformed bytes."""

from __future__ import annotations

import re
import struct
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pcodec import ChunkConfig, standalone

from fabricops.core.catalogue import CATALOGUE
from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline.keyframe import (
    ENCODING,
    ENCODINGS,
    KeyframeDecodeError,
    KeyframeError,
    SeriesBlock,
    decode_block,
    encode_block,
)
from fabricops.pipeline.keyframe_entropy import ENTROPY
from fabricops.pipeline.keyframe_series import BodyReader
from tests.pipeline.keyframe_blocks import COUNTER, STATE, block
from tests.pipeline.keyframe_bytes import SECOND, T0, U64_MAX, body_of, rewrap

RX_POWER = CATALOGUE.id_of("rx_power_dbm")
CAUSES = re.compile(r"truncated|length mismatch|bad magic|unknown version|checksum|corrupt|"
                    r"malformed|bad counts|unknown flags")
KF1_PAYLOAD = bytes.fromhex(
    "464f4b460100030000000800000005010000b900000000a6473128b52ffd6405005d050024070000faed"
    "5172861881010007060f18170c0a21940035007700020000000b6c6561662d303a6574683132010020"
    "000900000102f7fffffdff8408040a0c0009e6ff01007b14ae47e17a843ff90000008183002003000000"
    "009c0000758800003c0000e400f837f07f7e7f020000000000000018003849ae0ad8051c0dc01c48013d"
    "d598c5140cec562f0c15a00257a10c06ef8a098b8f4a2100179054b82edbef528386816070d100bc9021"
    "a414")
"""A kf1 payload as version 1 wrote it: a counter wrapping at 2**64 and 2**32 with an
absent point, an optics gauge (bound 0.01) with NaN, 1e300 and inf, a state."""


def jittered(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return T0 + np.cumsum(SECOND + rng.integers(-8_000_000, 8_000_000, n)).astype(np.int64)


def floats(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).view(np.uint64)


def test_version_2_is_written_on_request() -> None:
    b = block([COUNTER], np.arange(5, dtype=np.uint64))
    assert ENCODINGS[2] == "kf2" != ENCODING  # the default is newer (tests: test_codec_kf3_refs)
    assert encode_block(b, 0.0, version=2)[4] == 2
    assert decode_block(encode_block(b, 0.0, version=2)) == b
    assert encode_block(b, 0.0, version=1)[4] == 1
    with pytest.raises(KeyframeError, match="unknown format version"):
        encode_block(b, 0.0, version=9)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_counters_are_bit_exact_through_resets_and_wraps(version: int) -> None:
    n = 40
    rate = np.uint64(48_000_000_000)
    wrap64 = np.uint64(U64_MAX - 10**11) + np.arange(n, dtype=np.uint64) * rate
    wrap32 = (np.uint64(2**32 - 5_000_000) + np.arange(n, dtype=np.uint64)
              * np.uint64(1_200_000)) & np.uint64(2**32 - 1)
    reset = np.arange(n, dtype=np.uint64) * rate + np.uint64(2**47)
    reset[25:] = np.arange(n - 25, dtype=np.uint64) * rate
    constant = np.full(n, 123_456_789, np.uint64)
    jumps = np.random.default_rng(1).integers(0, 2**64, n, dtype=np.uint64)
    raw = np.vstack([wrap64, wrap32, reset, constant, jumps])
    assert (np.diff(wrap64.astype(np.float64)) < 0).any()
    for ts in (None, jittered(n)):
        b = block([COUNTER] * 5, raw, ts=ts)
        assert decode_block(encode_block(b, 0.0, version=version)) == b


@pytest.mark.parametrize("version", [1, 2, 3])
def test_single_point_and_empty_blocks(version: int) -> None:
    raw = np.vstack([np.array([U64_MAX], np.uint64), floats(np.array([-2.5])),
                     np.array([1], np.uint64)])
    one = block([COUNTER, RX_POWER, STATE], raw)
    assert decode_block(encode_block(one, 0.0, version=version)) == one
    lossy = decode_block(encode_block(one, 0.01, version=version))
    assert abs(lossy.raw.view(np.float64)[1, 0] + 2.5) <= 0.01
    empty = block([], np.zeros((0, 7), np.uint64))
    assert decode_block(encode_block(empty, 0.0, version=version)) == empty


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 4), st.integers(2, 30), st.data())
def test_any_counters_with_jittered_polls_round_trip(rows: int, n: int,
                                                     data: st.DataObject) -> None:
    values = data.draw(st.lists(st.integers(0, U64_MAX), min_size=rows * n, max_size=rows * n))
    gaps = data.draw(st.lists(st.integers(1, 3 * SECOND), min_size=n, max_size=n))
    raw = np.array(values, np.uint64).reshape(rows, n)
    raw[0] = np.cumsum(raw[0] >> np.uint64(30), dtype=np.uint64)
    b = block([COUNTER] * rows, raw, ts=T0 + np.cumsum(gaps).astype(np.int64))
    assert decode_block(encode_block(b, 0.0)) == b


def test_steady_rate_under_poll_jitter_costs_less_than_version_1() -> None:
    ts = jittered(600, 3)
    rates = np.random.default_rng(4).uniform(1e9, 5e10, (50, 1))
    dt = np.diff(ts, prepend=ts[0] - SECOND) / 1e9
    raw = (np.uint64(2**40) + np.cumsum(np.round(rates * dt), axis=1).astype(np.uint64))
    b = block([COUNTER] * 50, raw, ts=ts)
    v1, v2 = encode_block(b, 0.0, version=1), encode_block(b, 0.0)
    assert decode_block(v2) == b
    assert len(v2) < 0.6 * len(v1)


def test_optics_reported_on_the_bound_grid_stay_within_bound_and_small() -> None:
    rng = np.random.default_rng(5)
    level = rng.uniform(-6, 2, (40, 1))
    x = np.round((level + rng.normal(0, 0.02, (40, 600))) * 100) / 100
    b = block([RX_POWER] * 40, floats(x))
    v1, v2 = encode_block(b, 0.01, version=1), encode_block(b, 0.01)
    got = decode_block(v2).raw.view(np.float64)
    assert all(abs(Fraction(float(g)) - Fraction(float(o))) <= Fraction(0.01)
               for g, o in zip(got.ravel(), x.ravel(), strict=True))
    assert len(v2) < 0.5 * len(v1)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1,
                max_size=30), st.sampled_from([1e-3, 0.01, 0.1, 8.0, 1e-300, 2.0**1000]))
def test_gauges_stay_within_bound_in_every_version(values: list[float], bound: float) -> None:
    x = np.array(values)
    for version in (1, 2, 3):
        got = decode_block(encode_block(block([RX_POWER], floats(x)), bound, version=version))
        y = got.raw.view(np.float64)[0]
        for g, o in zip(y.tolist(), x.tolist(), strict=True):
            if np.isfinite(o):
                assert abs(Fraction(g) - Fraction(o)) <= Fraction(bound)
            else:
                assert floats(np.array([g]))[0] == floats(np.array([o]))[0]


def test_a_block_written_by_version_1_still_decodes() -> None:
    got = decode_block(KF1_PAYLOAD)
    assert got.entity == ("leaf-0:eth1", "leaf-0:eth1", "leaf-0:eth2")
    assert got.present[0].tolist() == [True] * 4 + [False] + [True] * 3
    assert got.raw[0].tolist() == [U64_MAX - 2, U64_MAX, 4, 10, 0, 7, 2**32 - 1, 2**32 + 5]
    gauge = got.raw[1].view(np.float64)
    assert np.isnan(gauge[3])
    assert gauge[[4, 6]].tolist() == [1e300, np.inf]
    assert np.all(np.abs(gauge[[0, 1, 2, 5, 7]] - [-2.5, -2.49, -2.51, -2.5, 0.125]) <= 0.01)
    assert got.raw[2].tolist() == [1, 1, 2, 2, 2, 1, 1, 1]
    assert np.diff(got.ts_ns).tolist() == [SECOND + d for d in (3, -5, 7, -5, 1, 6, -11)]


def sample_payload() -> tuple[SeriesBlock, bytes]:
    n, ts = 24, jittered(24, 7)
    rng = np.random.default_rng(8)
    counters = np.cumsum(rng.integers(0, 10**9, (3, n)), axis=1).astype(np.uint64)
    gauges = floats(np.round(rng.normal(-3, 0.05, (2, n)) * 100) / 100)
    raw = np.vstack([counters, gauges, np.ones((1, n), np.uint64)])
    present = np.ones(raw.shape, bool)
    present[1, 5] = False
    raw[1, 5] = 0
    b = block([COUNTER] * 3 + [RX_POWER] * 2 + [STATE], raw, present, ts)
    return b, encode_block(b, np.array([0, 0, 0, 0.01, 0.0, 0]))


def decode_or_cause(payload: bytes) -> SeriesBlock | str:
    try:
        return decode_block(payload)
    except KeyframeDecodeError as exc:
        return str(exc)


def assert_refused(outcome: SeriesBlock | str) -> None:
    assert isinstance(outcome, str)
    assert CAUSES.search(outcome), outcome


def test_every_truncation_of_a_kf2_payload_is_refused() -> None:
    _, payload = sample_payload()
    for size in range(len(payload)):
        cause = decode_or_cause(payload[:size])
        assert_refused(cause)
    body = body_of(payload)
    for size in range(0, len(body), 3):
        cause = decode_or_cause(rewrap(payload, body[:size]))
        assert_refused(cause)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_corrupt_bodies_are_refused_or_decode_to_a_valid_block(data: st.DataObject) -> None:
    original, payload = sample_payload()
    body = bytearray(body_of(payload))
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    outcome = decode_or_cause(rewrap(payload, bytes(body)))
    if isinstance(outcome, str):
        assert CAUSES.search(outcome), outcome
    else:
        assert outcome.raw.shape == original.raw.shape
        assert (np.diff(outcome.ts_ns) > 0).all()


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_garbage_bytes_are_refused(junk: bytes) -> None:
    _, payload = sample_payload()
    for candidate in (junk, payload[:26] + junk, rewrap(payload, junk)):
        cause = decode_or_cause(candidate)
        assert_refused(cause)


def stream_bytes(modes: list[int], divisors: list[int], groups: list[int],
                 *chunks: bytes) -> bytes:
    parts = [bytes(modes), kp.shuffle(np.array(divisors, np.uint64)), bytes(groups)]
    for chunk in chunks:
        parts += [struct.pack("<I", len(chunk)), chunk]
    return b"".join(parts)


def chunk(values: list[int], dtype: str = "int64") -> bytes:
    return bytes(standalone.simple_compress(np.array(values, dtype), ChunkConfig()))


@pytest.mark.parametrize(("raw", "allow_rate", "cause"), [
    (stream_bytes([0x81], [1], [3], chunk([1, 2, 3])), False, None),
    (stream_bytes([0x81], [1], [12], chunk([1, 2, 3])), False, "groups: code 12"),
    (stream_bytes([0x81], [1], [3], chunk([1, 2])), False, "2 values where the block needs 3"),
    (stream_bytes([0x81], [1], [3], chunk([1, 2, 3, 4])), False, "where the block needs 3"),
    (stream_bytes([0x81], [1], [3], chunk([1, 2, 3], "uint64")), False, "corrupt counter chunk"),
    (stream_bytes([0x81], [1], [3], b"\x00" * 9), False, "corrupt counter chunk"),
    (stream_bytes([0x81], [1], [3])[:-1], False, "truncated"),
    (stream_bytes([0x81], [0], [0]), False, "a divisor of 0"),
    (stream_bytes([0x00], [2], [0]), False, "lacks"),
    (stream_bytes([0x40], [1], [0]), False, "lacks"),
    (stream_bytes([0x40], [1], [0]), True, None),
    (stream_bytes([0x00], [2], [0]), None, "a divisor on an XOR row"),
])
def test_out_of_range_stream_fields_are_refused(raw: bytes, allow_rate: bool | None,
                                                cause: str | None) -> None:
    def read() -> object:
        rd = BodyReader(raw)
        out = ENTROPY.read(rd, 1, 3, "counter", allow_xor=allow_rate is None,
                           allow_rate=bool(allow_rate))
        rd.done()
        return out
    if cause is None:
        read()
    else:
        with pytest.raises(KeyframeDecodeError, match=cause):
            read()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, U64_MAX), min_size=2, max_size=20),
       st.lists(st.floats(0.5, 4.0), min_size=20, max_size=20))
def test_rate_residuals_invert_exactly_even_where_predictions_clip(
        values: list[int], ratio: list[float]) -> None:
    y = np.array([0, *values[1:]], np.uint64)[None, :]
    r = np.array([1.0, 1.0, *ratio])[:y.shape[1]]
    d = y.copy()
    d[:, 1:] -= y[:, :-1]
    e = kp.rate_residuals(d, r)
    got = kp.integrate(e[:, 1:], np.array([kp.RATE_MODE], np.uint8), r)
    assert got.tolist() == y[:, 1:].tolist()
