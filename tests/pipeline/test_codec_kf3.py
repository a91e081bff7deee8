"""Keyframe format version 3: a counter coded from a sibling counter of its entity
(packets from octets), and counters of on/off phases as rates per nominal interval.
Exact round trips through wraps, resets and late polls, smaller blocks than
version 2, older payloads, and malformed tables and sections."""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricops.core.catalogue import CATALOGUE
from fabricops.pipeline import keyframe_counters as kc
from fabricops.pipeline import keyframe_norm as kn
from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline import keyframe_refs as kr
from fabricops.pipeline import keyframe_series as ks
from fabricops.pipeline.keyframe import (
    ENCODING,
    ENCODINGS,
    KeyframeDecodeError,
    KeyframeError,
    SeriesBlock,
    decode_block,
    encode_block,
)
from fabricops.pipeline.keyframe_batch import settle
from fabricops.pipeline.keyframe_entropy import ENTROPY_LOOKBACK, read_column, write_column
from fabricops.pipeline.keyframe_series import BodyReader
from tests.pipeline.keyframe_bytes import SECOND, T0, U64_MAX, body_of, rewrap

IN_OCTETS, IN_PKTS = CATALOGUE.id_of("in_octets"), CATALOGUE.id_of("in_pkts")
OUT_OCTETS, OUT_PKTS = CATALOGUE.id_of("out_octets"), CATALOGUE.id_of("out_pkts")
PORT_METRICS = (IN_OCTETS, IN_PKTS, OUT_OCTETS, OUT_PKTS)
KF2_PAYLOAD = bytes.fromhex(
    "464f4b4602000300000006000000b6000000910000005df578a928b52ffd24b625040082471a"
    "24904d73a8becd7fb3b6cd3e51a381b96a34484a06099a5bd77c94651748ae3d3724f74e017f"
    "ec3b36e2612fcb7122558830a5a6ee03801b75bfec418aa20c3f9e5b5727554f9c16f6c1f7da"
    "b86c2a0fc6c242a9645ef89509b44d4b751302b508d7d9401a4922841a09003844403818c023"
    "84147152150fabc1e08ccd0c2f005fded94245")
"""A kf2 payload as version 2 wrote it: a port's in octets and packets (the packets
wrapping at 2**32, one point absent) and a state, over six jittered polls."""
KF2_OCTETS = [2**40, 2**40 + 4_000_000_000, 2**40 + 9_000_000_000, 2**40 + 9_000_000_000,
              2**40 + 15_000_000_000, 2**40 + 22_000_000_000]
KF2_PKTS = [2**32 - 500_000, 461_040, 0, 2_383_440, 3_826_080, 5_508_720]


def port_block(ports: int = 12, n: int = 60, seed: int = 0, wrap32: bool = True,
               reboot_at: int | None = 40) -> SeriesBlock:
    """``ports`` ports of one leaf, in and out octets and packets: bursty on/off rates,
    packets = octets over a frame size with noise; port 0's packets wrap at 2**32, every
    counter of port 1 restarts from 0 at ``reboot_at``, a few points are absent."""
    rng = np.random.default_rng(seed)
    gaps = SECOND + rng.integers(-8_000_000, 8_000_000, n)
    ts = T0 + np.cumsum(gaps).astype(np.int64)
    rows, entity, metric = [], [], []
    for p in range(ports):
        for side in ("in", "out"):
            on = (np.arange(n) + rng.integers(0, 9)) % 9 < rng.integers(2, 7)
            rate = np.where(on, rng.uniform(3e10, 4.8e10), rng.uniform(0, 1e8))
            octets = np.round(rate * rng.normal(1.0, 0.01, n) * gaps / 1e9).astype(np.int64)
            size = 4158.0 - 4074.0 * np.clip(rng.uniform(0.02, 0.1) + rng.normal(0, 0.002, n),
                                             0.0, 0.5)
            pkts = np.round(octets / size).astype(np.int64)
            start = rng.integers(0, 2**48, 2, dtype=np.uint64)
            o_cum = start[0] + np.cumsum(octets).astype(np.uint64)
            p_cum = start[1] + np.cumsum(pkts).astype(np.uint64)
            if p == 0 and wrap32:
                p_cum = (p_cum - start[1] + np.uint64(2**32 - 3_000_000)) & np.uint64(2**32 - 1)
            if p == 1 and reboot_at is not None:
                o_cum[reboot_at:] = np.cumsum(octets[reboot_at:]).astype(np.uint64)
                p_cum[reboot_at:] = np.cumsum(pkts[reboot_at:]).astype(np.uint64)
            rows += [o_cum, p_cum]
            entity += [f"leaf-0:eth{p + 1}"] * 2
            metric += [IN_OCTETS, IN_PKTS] if side == "in" else [OUT_OCTETS, OUT_PKTS]
    raw = np.vstack(rows)
    present = rng.random(raw.shape) >= 0.01
    raw[~present] = 0
    return SeriesBlock(ts, tuple(entity), np.array(metric, np.uint16), raw, present)


def references_of(b: SeriesBlock) -> kr.References:
    """The references the encoder chooses for ``b``'s rows (all counters here)."""
    from fabricops.pipeline.keyframe_series import ffill

    ids = {e: i for i, e in enumerate(dict.fromkeys(b.entity))}
    return kr.choose(ffill(b.raw, b.present), np.array([ids[e] for e in b.entity]))


def test_new_blocks_are_kf3_and_older_versions_are_written_on_request() -> None:
    b = port_block(ports=2, n=8)
    assert ENCODING == ENCODINGS[3] == "kf3"
    for version in (1, 2, 3):
        payload = encode_block(b, 0.0, version=version)
        assert payload[4] == version
        assert decode_block(payload) == b
    assert encode_block(b, 0.0)[4] == 3
    with pytest.raises(KeyframeError, match="unknown format version"):
        encode_block(b, 0.0, version=4)


def test_packets_are_coded_from_their_octets_and_the_block_is_smaller() -> None:
    b = port_block()
    refs = references_of(b)
    pairs = {(int(b.metric[r]), int(b.metric[o])) for r, o in zip(refs.row, refs.ref,
                                                                   strict=True)}
    assert pairs <= {(IN_PKTS, IN_OCTETS), (OUT_PKTS, OUT_OCTETS)}
    assert all(b.entity[r] == b.entity[o] for r, o in zip(refs.row, refs.ref, strict=True))
    assert len(refs) >= 16  # most of the 24 packet counters
    v2, v3 = encode_block(b, 0.0, version=2), encode_block(b, 0.0)
    assert decode_block(v3) == b
    pkts_samples = int(b.present[np.isin(b.metric, (IN_PKTS, OUT_PKTS))].sum())
    assert len(v2) - len(v3) > pkts_samples / 16  # at least half a bit a packet sample


def test_unrelated_counters_get_no_reference() -> None:
    rng = np.random.default_rng(3)
    walks = np.cumsum(rng.integers(0, 2**40, (4, 60)), axis=1).astype(np.uint64)
    b = SeriesBlock(T0 + np.arange(60, dtype=np.int64) * SECOND, ("leaf-0:eth1",) * 4,
                    np.array(PORT_METRICS, np.uint16), walks, np.ones(walks.shape, bool))
    assert len(references_of(b)) == 0
    assert decode_block(encode_block(b, 0.0)) == b


def test_references_round_trip_through_wraps_resets_and_extremes() -> None:
    b = port_block(ports=6, seed=5)
    raw = b.raw.copy()
    raw[4] = np.uint64(U64_MAX - 10**11) + np.arange(60, dtype=np.uint64) * np.uint64(
        48_000_000_000)  # port 2 in octets wrap at 2**64: its packets' reference jumps
    raw[5, 30:] = np.random.default_rng(9).integers(0, 2**64, 30, dtype=np.uint64)
    raw[~b.present] = 0
    hard = SeriesBlock(b.ts_ns, b.entity, b.metric, raw, b.present)
    assert decode_block(encode_block(hard, 0.0)) == hard
    for seed in range(4):
        other = port_block(ports=4, seed=seed, reboot_at=seed * 15 or None)
        assert decode_block(encode_block(other, 0.0)) == other


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 40), st.floats(1e-9, 1e9), st.floats(0.0, 0.2), st.integers(0, 2**63),
       st.integers(0, 2**32), st.data())
def test_any_scaled_sibling_round_trips(n: int, ratio: float, noise: float, start: int,
                                        step: int, data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    base = rng.integers(0, step + 1, n).astype(np.float64)
    base[0] = 0
    sibling = np.round(base * ratio * rng.normal(1.0, noise + 1e-12, n))
    steps = np.vstack([base, np.clip(sibling, 0, 2.0**62)]).astype(np.uint64)
    cum = np.cumsum(steps, axis=1, dtype=np.uint64) + np.uint64(start)  # wrapping
    mask = data.draw(st.sampled_from([2**64 - 1, 2**32 - 1, 2**16 - 1]))
    cum[1] &= np.uint64(mask)
    present = np.ones(cum.shape, bool)
    if data.draw(st.booleans()):
        present[:, data.draw(st.integers(0, n - 1))] = False
        cum[~present] = 0
    b = SeriesBlock(T0 + np.arange(n, dtype=np.int64) * SECOND, ("nic-0:eth1",) * 2,
                    np.array([IN_OCTETS, IN_PKTS], np.uint16), cum, present)
    assert decode_block(encode_block(b, 0.0)) == b


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 30), st.floats(width=32, allow_nan=False, allow_infinity=False),
       st.data())
def test_any_rows_and_ratio_come_back_from_their_reference(n: int, ratio: float,
                                                            data: st.DataObject) -> None:
    values = data.draw(st.lists(st.integers(0, U64_MAX), min_size=3 * n, max_size=3 * n))
    x = np.array(values, np.uint64).reshape(3, n)
    refs = kr.References(np.array([0, 2]), np.array([1, 1]), np.float32([ratio, -ratio]))
    coded = kr.remove(x, refs)
    assert np.array_equal(coded[:, 0], x[:, 0])
    assert np.array_equal(coded[1], x[1])
    assert np.array_equal(kr.restore(coded, refs), x)


def test_a_block_written_by_version_2_still_decodes() -> None:
    got = decode_block(KF2_PAYLOAD)
    assert got.entity == ("leaf-0:eth1",) * 3
    assert got.raw[0].tolist() == KF2_OCTETS
    pkts = got.raw[1].tolist()
    assert got.present[1].tolist() == [True, True, False, True, True, True]
    assert pkts == KF2_PKTS
    assert got.raw[2].tolist() == [1, 1, 1, 2, 1, 1]


def table(rows: list[int], refs: list[int], ratios: list[float], count: int | None = None
          ) -> bytes:
    """A reference table as ``keyframe_refs.write`` lays it out (steps, offsets, planes),
    from rows and references that may be anything."""
    n = len(rows) if count is None else count
    steps = np.diff(np.array(rows, np.int64), prepend=0)
    planes = np.array(ratios, "<f4").view(np.uint8).reshape(-1, 4).T
    return (struct.pack("<I", n) + steps.astype("<u4").tobytes()
            + (np.array(rows) - np.array(refs)).astype("<i4").tobytes() + planes.tobytes())


@pytest.mark.parametrize(("raw", "cause"), [
    (table([1], [0], [0.5], count=9), "9 for 4 rows"),
    (table([4], [0], [0.5]), "outside the section"),
    (table([1], [7], [0.5]), "outside the section"),
    (table([2, 1], [0, 0], [0.5, 0.5]), "outside the section"),  # a step back wraps
    (table([1, 1], [0, 0], [0.5, 0.5]), "ascending"),
    (table([1, 2], [2, 0], [0.5, 0.5]), "a reference is referencing"),
    (table([1], [1], [0.5]), "a reference is referencing"),
    (table([1], [0], [float("nan")]), "not finite"),
    (table([1], [0], [float("inf")]), "not finite"),
    (table([1, 2], [0, 0], [0.5, 0.5])[:-3], "truncated reference ratios"),
    (b"\x01\x00", "truncated"),
])
def test_malformed_reference_tables_are_refused(raw: bytes, cause: str) -> None:
    with pytest.raises(KeyframeDecodeError, match=cause):
        kr.read(BodyReader(raw), 4)


def test_a_table_read_back_is_the_table_written() -> None:
    refs = references_of(port_block())
    out: list[bytes] = []
    kr.write(out, refs)
    rd = BodyReader(b"".join(out))
    back = kr.read(rd, 48)
    rd.done()
    assert np.array_equal(back.row, refs.row)
    assert np.array_equal(back.ref, refs.ref)
    assert np.array_equal(back.ratio, refs.ratio)


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
