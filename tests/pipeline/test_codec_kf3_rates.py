"""Keyframe format version 3: counters of on/off phases as rates per nominal interval. Exact
round trips through late polls, and truncated, corrupt and malformed payloads and sections."""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricops.pipeline import keyframe_counters as kc
from fabricops.pipeline import keyframe_norm as kn
from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline import keyframe_series as ks
from fabricops.pipeline.keyframe import KeyframeDecodeError, SeriesBlock, decode_block, encode_block
from fabricops.pipeline.keyframe_batch import settle
from fabricops.pipeline.keyframe_entropy import ENTROPY_LOOKBACK, read_column, write_column
from fabricops.pipeline.keyframe_series import BodyReader
from tests.pipeline.keyframe_blocks import IN_OCTETS, port_block, references_of
from tests.pipeline.keyframe_bytes import SECOND, T0, U64_MAX, body_of, rewrap


def rate_block() -> SeriesBlock:
    """On/off counters under jittered polls with a late one: rows coded as rates."""
    ts, x = on_off_counters(40, 60, 3, gap_at=5)
    return SeriesBlock(ts, tuple(f"leaf-0:eth{i}" for i in range(40)),
                       np.full(40, IN_OCTETS, np.uint16), x, np.ones(x.shape, bool))


@pytest.mark.parametrize("make", [lambda: port_block(ports=2, n=30), rate_block])
def test_every_truncation_of_a_payload_is_refused(make: Callable[[], SeriesBlock]) -> None:
    b = make()
    payload = encode_block(b, 0.0)
    step = max(1, len(payload) // 1500)
    for size in range(0, len(payload), step):
        with pytest.raises(KeyframeDecodeError):
            decode_block(payload[:size])
    body = body_of(payload)
    for size in range(0, len(body), max(1, len(body) // 1500)):
        with pytest.raises(KeyframeDecodeError):
            decode_block(rewrap(payload, body[:size]))


def test_the_truncated_payloads_hold_references_and_rates() -> None:
    assert len(references_of(port_block(ports=2, n=30))) > 0
    _, modes = counter_section(rate_block().raw, rate_block().ts_ns)
    assert (modes == kp.NORM_MODE).any()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_corrupt_bodies_with_references_are_refused_or_decode_to_a_valid_block(
        data: st.DataObject) -> None:
    b = port_block(ports=2, n=30) if data.draw(st.booleans()) else rate_block()
    payload = encode_block(b, 0.0)
    body = bytearray(body_of(payload))
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    try:
        got = decode_block(rewrap(payload, bytes(body)))
    except KeyframeDecodeError:
        return
    assert got.raw.shape == b.raw.shape
    assert (np.diff(got.ts_ns) > 0).all()


def on_off_counters(rows: int, n: int, seed: int, gap_at: int | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Octet counters of a job's on/off phases under jittered polls (a poll ``gap_at``
    comes 40 s late): what rate coding pays twice for and rates per interval do not."""
    rng = np.random.default_rng(seed)
    gaps = SECOND + rng.integers(-6_000_000, 6_000_000, n)
    if gap_at is not None:
        gaps[gap_at] += 40 * SECOND
    ts = T0 + np.cumsum(gaps).astype(np.int64)
    period = rng.uniform(17.0, 30.0)  # a training step, longer than the longest lag
    pos = ((np.arange(n)[None, :] + rng.uniform(0, period, (rows, 1))) % period) / period
    on = np.clip((0.4 - pos) * period, 0.0, 1.0)  # the share of each poll spent sending
    noise = rng.normal(1.0, 0.005, (rows, n))  # on the collective's share only
    rate = on * rng.uniform(4e10, 4.8e10, (rows, 1)) * noise + rng.uniform(1e6, 1e9, (rows, 1))
    steps = np.round(rate * gaps / 1e9).astype(np.uint64)
    steps[:, 0] = 0
    start = rng.integers(0, 2**48, (rows, 1), dtype=np.uint64)
    return ts, start + np.cumsum(steps, axis=1, dtype=np.uint64)


def counter_section(x: np.ndarray, ts: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The version 3 counter section of rows of distinct ports (so no reference), and
    its rows' modes."""
    out: list[bytes] = []
    settle(kc.write(out, x, np.arange(len(x)), ts, ENTROPY_LOOKBACK))
    assert out[0] == b"\0\0\0\0"  # an empty reference table
    return b"".join(out), np.frombuffer(out[6], np.uint8)  # after the keyframe chunk


def read_section(body: bytes, rows: int, n: int, ts: np.ndarray) -> np.ndarray:
    rd = BodyReader(body)
    x = kc.read(rd, rows, n, ts, ENTROPY_LOOKBACK)
    rd.done()
    return x


def modes_offset(body: bytes) -> int:
    """Where the modes start: after the empty reference table (its count), the keyframes'
    u32 length and their chunk."""
    return 8 + int(struct.unpack_from("<I", body, 4)[0])


def test_on_off_rates_are_coded_per_interval_and_come_back_exact() -> None:
    ts, x = on_off_counters(40, 60, 1)
    body, modes = counter_section(x, ts)
    assert (modes == kp.NORM_MODE).sum() >= 30
    assert np.array_equal(read_section(body, 40, 60, ts), x)
    b = SeriesBlock(ts, tuple(f"leaf-0:eth{i}" for i in range(40)),
                    np.full(40, IN_OCTETS, np.uint16), x, np.ones(x.shape, bool))
    v2, v3 = encode_block(b, 0.0, version=2), encode_block(b, 0.0)
    assert decode_block(v3) == b
    assert len(v3) < len(v2)


def test_a_late_poll_is_corrected_and_huge_steps_stay_in_rate_mode() -> None:
    ts, x = on_off_counters(40, 60, 2, gap_at=17)
    x[3, 30:] += np.uint64(2**60)  # a step no float64 rate holds to the unit
    x[4, 25:] -= x[4, 25]  # a reset
    body, modes = counter_section(x, ts)
    assert (modes == kp.NORM_MODE).sum() >= 20
    assert modes[3] != kp.NORM_MODE
    assert np.array_equal(read_section(body, 40, 60, ts), x)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 6), st.integers(2, 40), st.data())
def test_any_counters_under_any_poll_times_round_trip_in_the_counter_section(
        rows: int, n: int, data: st.DataObject) -> None:
    gaps = data.draw(st.lists(st.integers(1, 100 * SECOND), min_size=n, max_size=n))
    ts = T0 + np.cumsum(gaps).astype(np.int64)
    kind = data.draw(st.sampled_from(["rates", "any"]))
    if kind == "rates":
        rate = np.array(data.draw(st.lists(st.integers(0, 2**40), min_size=rows,
                                           max_size=rows)), np.float64)
        steps = np.round(rate[:, None] * np.array(gaps) / 1e9).astype(np.uint64)
        x = np.cumsum(steps, axis=1, dtype=np.uint64)
    else:
        values = data.draw(st.lists(st.integers(0, U64_MAX), min_size=rows * n,
                                    max_size=rows * n))
        x = np.array(values, np.uint64).reshape(rows, n)
    body, _ = counter_section(x, ts)
    assert np.array_equal(read_section(body, rows, n, ts), x)


def test_malformed_rate_sections_are_refused() -> None:
    ts, x = on_off_counters(40, 60, 3, gap_at=5)
    body, modes = counter_section(x, ts)
    assert (modes == kp.NORM_MODE).any()
    with pytest.raises(KeyframeDecodeError, match="truncated"):
        read_section(body[:-1], 40, 60, ts)
    at = modes_offset(body)
    flipped = bytearray(body)
    flipped[at + int(np.flatnonzero(modes == kp.NORM_MODE)[0])] = kp.RATE_MODE
    with pytest.raises(KeyframeDecodeError, match="lookback group"):
        read_section(bytes(flipped), 40, 60, ts)
    rd = BodyReader(b"\x0c")
    with pytest.raises(KeyframeDecodeError, match="correction width"):
        kn.read_corrections(rd, 2, 3)
    with pytest.raises(KeyframeDecodeError, match="truncated corrections"):
        kn.read_corrections(BodyReader(b"\x02\x00"), 4, 4)


def test_keyframe_columns_round_trip_and_refuse_what_they_cannot_be() -> None:
    x = np.array([0, 1, 2**48 - 1, 2**63, U64_MAX, 7], np.uint64)
    out: list[bytes] = []
    write_column(out, x)
    body = b"".join(out)
    rd = BodyReader(body)
    assert np.array_equal(read_column(rd, 6, "keyframes"), x)
    rd.done()
    with pytest.raises(KeyframeDecodeError, match="where the block needs 7"):
        read_column(BodyReader(body), 7, "keyframes")
    with pytest.raises(KeyframeDecodeError, match="truncated keyframes"):
        read_column(BodyReader(body[:-2]), 6, "keyframes")
    with pytest.raises(KeyframeDecodeError, match="bytes for no values"):
        read_column(BodyReader(body), 0, "keyframes")
    empty: list[bytes] = []
    write_column(empty, np.zeros(0, np.uint64))
    assert read_column(BodyReader(b"".join(empty)), 0, "keyframes").size == 0


def test_timestamps_that_do_not_rise_are_refused_before_the_sections_read_them(
        recwarn: pytest.WarningsRecorder) -> None:
    b = rate_block()
    payload = encode_block(b, 0.0)
    body = body_of(payload)
    section: list[bytes] = []
    settle(ks.write_integers(section, b.ts_ns.view(np.uint64)[None, :], ENTROPY_LOOKBACK))
    old = b"".join(section)
    assert body.startswith(old)
    flat = np.full(b.n_points, b.ts_ns[0])  # every interval 0 but the last
    flat[-1] += SECOND
    section = []
    settle(ks.write_integers(section, flat.view(np.uint64)[None, :], ENTROPY_LOOKBACK))
    with pytest.raises(KeyframeDecodeError, match="not strictly increasing"):
        decode_block(rewrap(payload, b"".join(section) + body[len(old):]))
    assert not recwarn.list  # no division by a zero interval on the way
