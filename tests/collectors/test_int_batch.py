"""The IntBatch record: construction checks, selection, readable view and bus codec."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.core.intreport import (
    CODEC_VERSION,
    INVALID,
    SCHEMA,
    IntBatch,
    IntBatchError,
    IntDecodeError,
    concat,
)
from fabricops.core.wire_schema import message_class
from tests.collectors.int_samples import COMMON_BITS, differences, random_batch


def sample(seed: int = 1, n: int = 5) -> IntBatch:
    rng = np.random.default_rng(seed)
    return random_batch(rng, n, rng.integers(0, 5, n).tolist(), COMMON_BITS)


def test_codec_round_trip_is_exact() -> None:
    batch = sample()
    data = batch.encode()
    assert CODEC_VERSION == 2
    assert IntBatch.decode(data) == batch
    assert IntBatch.decode(memoryview(bytearray(data))) == batch
    assert IntBatch.decode(IntBatch.empty().encode()) == IntBatch.empty()


@pytest.mark.parametrize(("mutate", "cause"), [
    (lambda d: b"FOI\x01" + d, "not a fabricops.intreport.v2.IntBatch record"),
    (lambda d: d[:-1], "runs past the end"),
    (lambda d: d[:4], "holds 0 values but n_reports is 5"),
    (lambda d: d[:5], "truncated varint at offset 5"),
    (lambda d: d + b"\x00", "field number 0"),
    (lambda d: d + b"\x08\x09", "holds 5 values but n_reports is 9"),
])
def test_decode_names_the_defect(mutate: object, cause: str) -> None:
    data = sample().encode()
    with pytest.raises(IntDecodeError, match=cause):
        IntBatch.decode(mutate(data))  # type: ignore[operator]


def test_decode_rejects_hop_counts_that_do_not_add_up() -> None:
    message = message_class(SCHEMA).FromString(sample(n=3).encode())
    message.hop_count[0] += 1
    with pytest.raises(IntDecodeError, match="hop counts sum"):
        IntBatch.decode(message.SerializeToString())


def test_construction_checks_dtypes_and_hop_offsets() -> None:
    batch = sample()
    cols = {n: getattr(batch, n) for n in batch.__dataclass_fields__}
    with pytest.raises(IntBatchError, match="node_id must be a 1-d uint32"):
        IntBatch(**cols | {"node_id": batch.node_id.astype(np.int64)})
    with pytest.raises(IntBatchError, match="hop_start is not the running sum"):
        IntBatch(**cols | {"hop_start": batch.hop_start[::-1].copy()})
    with pytest.raises(IntBatchError, match="missing"):
        IntBatch.from_columns({"ts_ns": [1]})


def test_take_and_concat_keep_reports_with_their_hops() -> None:
    a, b = sample(1), sample(2)
    both = concat([a, b])
    assert both.n_reports == a.n_reports + b.n_reports
    assert both.take(np.arange(a.n_reports, both.n_reports)) == b
    reversed_twice = both.take(np.arange(both.n_reports)[::-1]).take(
        np.arange(both.n_reports)[::-1])
    assert differences(reversed_twice, both) == []
    assert both.report_of_hop().tolist() == np.repeat(
        np.arange(both.n_reports), both.hop_count).tolist()


def test_missing_hop_fields_are_invalid_and_left_out_of_the_readable_view() -> None:
    batch = IntBatch.from_columns({
        "ts_ns": [10], "sink": [3], "src_ip": [0x0A000001], "dst_ip": [0x0A000002],
        "sport": [49152], "dport": [4791], "proto": [17], "hop_count": [2],
        "node_id": [1, 3], "hop_latency_ns": [700, INVALID["hop_latency_ns"]],
    })
    assert batch.valid("hop_latency_ns").tolist() == [True, False]
    assert batch.queue_occupancy.tolist() == [0xFFFFFF, 0xFFFFFF]
    (report,) = batch.reports({1: "leaf-0", 3: "leaf-1"})
    assert report["sink"] == "leaf-1"
    assert report["flow"]["src_ip"] == "10.0.0.1"
    assert report["hops"] == [{"node_id": 1, "node": "leaf-0", "hop_latency_ns": 700},
                              {"node_id": 3, "node": "leaf-1"}]
