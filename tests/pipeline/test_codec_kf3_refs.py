"""Keyframe format version 3: a counter coded from a sibling counter of its entity (packets
from octets). Exact round trips through wraps, resets and extremes, smaller blocks than
version 2, older payloads, and malformed reference tables."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricops.pipeline import keyframe_refs as kr
from fabricops.pipeline.keyframe import (
    ENCODING,
    ENCODINGS,
    KeyframeDecodeError,
    KeyframeError,
    SeriesBlock,
    decode_block,
    encode_block,
)
from fabricops.pipeline.keyframe_series import BodyReader
from tests.pipeline.keyframe_blocks import (
    IN_OCTETS,
    IN_PKTS,
    OUT_OCTETS,
    OUT_PKTS,
    port_block,
    references_of,
)
from tests.pipeline.keyframe_bytes import SECOND, T0, U64_MAX

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
