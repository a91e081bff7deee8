"""IntBatch holds only values its readers can keep: timestamps below 2**63 ns, occupancies
in their 24 bits. Construction and the bus codec refuse the rest, naming it."""

from __future__ import annotations

import contextlib
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricops.core.intreport import (
    INVALID,
    MAX_TS_NS,
    RANGE_REASONS,
    IntBatch,
    IntBatchError,
    IntDecodeError,
    range_codes,
)
from tests.collectors.int_samples import COMMON_BITS, random_batch


def sample(n: int = 4, seed: int = 1) -> IntBatch:
    rng = np.random.default_rng(seed)
    return random_batch(rng, n, rng.integers(1, 4, n).tolist(), COMMON_BITS,
                        ts_ns=rng.integers(0, MAX_TS_NS, n, dtype=np.int64))


def columns(batch: IntBatch) -> dict[str, np.ndarray]:
    return {n: getattr(batch, n).copy() for n in batch.__dataclass_fields__ if n != "hop_start"}


@pytest.mark.parametrize(("column", "value", "reason"), [
    ("ts_ns", 2**63, "timestamp_out_of_range"),
    ("ts_ns", 2**64 - 1, "timestamp_out_of_range"),
    ("egress_ts_ns", 2**63, "timestamp_out_of_range"),
    ("ingress_ts_ns", 2**64 - 2, "timestamp_out_of_range"),
    ("queue_occupancy", 2**24, "occupancy_out_of_range"),
    ("buffer_occupancy", 2**32 - 1, "occupancy_out_of_range"),
])
def test_a_value_past_its_field_cannot_be_built_and_its_report_is_found(
        column: str, value: int, reason: str) -> None:
    batch = sample()
    cols = columns(batch)
    cols[column][1] = value
    with pytest.raises(IntBatchError, match=rf"{reason}: column {column} holds {value}"):
        IntBatch.from_columns(cols)
    codes = range_codes(cols)
    owner = 1 if column == "ts_ns" else int(batch.report_of_hop()[1])
    assert np.flatnonzero(codes).tolist() == [owner]
    assert RANGE_REASONS[codes[owner] - 1] == reason


def test_not_reported_is_not_out_of_range() -> None:
    cols = columns(sample())
    for name in ("ingress_ts_ns", "egress_ts_ns", "queue_occupancy", "buffer_occupancy"):
        cols[name][:] = INVALID[name]
    cols["ts_ns"][:] = MAX_TS_NS
    assert not range_codes(cols).any()
    assert IntBatch.from_columns(cols).n_reports == 4


def test_range_codes_keep_the_first_defect_of_a_report() -> None:
    cols = columns(sample(n=3))
    cols["ts_ns"][2] = 2**63
    cols["queue_occupancy"][:] = 2**24
    codes = range_codes(cols)
    assert [RANGE_REASONS[c - 1] for c in codes.tolist()] == [
        "occupancy_out_of_range", "occupancy_out_of_range", "timestamp_out_of_range"]


def test_decode_rejects_an_encoded_timestamp_past_2_63() -> None:
    batch = sample()
    data = bytearray(batch.encode())
    at = data.index(struct.pack("<Q", int(batch.ts_ns[0])))  # report 0's ts_ns on the wire
    data[at:at + 8] = struct.pack("<Q", 2**63 + 7)
    with pytest.raises(IntDecodeError, match=r"timestamp_out_of_range.*ts_ns holds "
                                             rf"{2**63 + 7} at report #0"):
        IntBatch.decode(bytes(data))


def test_every_truncation_raises_int_decode_error() -> None:
    data = sample().encode()
    assert IntBatch.decode(b"") == IntBatch.empty()  # the empty record is the empty batch
    for cut in range(1, len(data)):
        with pytest.raises(IntDecodeError):
            IntBatch.decode(data[:cut])


@given(st.binary(max_size=300))
def test_random_bytes_raise_only_int_decode_error(data: bytes) -> None:
    n_rep, n_hop = (data[0] % 3, data[1] % 4) if len(data) > 1 else (0, 0)
    for buf in (data, bytes([0x08, n_rep, 0x10, n_hop]) + data):  # n_reports, n_hops
        with contextlib.suppress(IntDecodeError):
            IntBatch.decode(buf)


@given(st.data())
def test_corrupted_batches_decode_only_to_values_that_fit(data: st.DataObject) -> None:
    buf = bytearray(sample(n=3, seed=data.draw(st.integers(0, 1000))).encode())
    for _ in range(data.draw(st.integers(1, 6))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    try:
        batch = IntBatch.decode(bytes(buf))
    except IntDecodeError:
        return
    assert int(batch.ts_ns.max(initial=0)) <= MAX_TS_NS
    assert not range_codes(columns(batch)).any()
