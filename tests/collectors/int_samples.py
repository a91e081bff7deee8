"""Random INT batches for codec and parser tests, and what a batch looks like after the wire."""

from __future__ import annotations

from typing import Any

import numpy as np

from fabricops.core.intreport import HOP_COLUMNS, INVALID, REPORT_COLUMNS, IntBatch

COMMON_BITS = 0xFD00  # node id, L1 ports, latency, queue, ingress ts, egress ts, tx util


def random_batch(rng: np.random.Generator, n: int, hops: int | list[int], instructions: int,
                 **report: Any) -> IntBatch:
    """``n`` reports of ``hops`` hops each, random values in every field ``instructions`` asks."""
    counts = np.broadcast_to(np.asarray(hops), (n,)).astype(np.int64)
    total = int(counts.sum())
    cols: dict[str, Any] = {
        "ts_ns": np.zeros(n, np.uint64), "sink": rng.integers(1, 2**32 - 1, n),
        "seq": np.arange(n) & 0x3FFFFF, "src_ip": rng.integers(0, 2**32, n),
        "dst_ip": rng.integers(0, 2**32, n), "sport": rng.integers(0, 2**16, n),
        "dport": np.full(n, 4791), "proto": np.full(n, 17), "flags": np.full(n, 0x02),
        "instructions": np.full(n, instructions), "hop_count": counts,
    }
    cols |= report
    for name, _, bit in HOP_COLUMNS:
        top = INVALID[name]
        values = rng.integers(0, min(top, 2**63 - 1), total, dtype=np.int64).astype(np.uint64)
        cols[name] = np.where(instructions & bit, values, np.uint64(top))
    return IntBatch.from_columns(cols)


def after_wire(batch: IntBatch, *, own_hop: bool = False, received_ns: int = 0) -> IntBatch:
    """``batch`` as a parser returns it: report timestamps from the last hop, and with
    ``own_hop`` (sink metadata in the report) the last hop's node id from the group
    header and no checksum complement."""
    cols = {name: getattr(batch, name).copy() for name, _ in REPORT_COLUMNS if name != "hop_start"}
    cols |= {name: getattr(batch, name).copy() for name, _, _ in HOP_COLUMNS}
    last = (batch.hop_start.astype(np.int64) + batch.hop_count - 1)[batch.hop_count > 0]
    with_hops = np.flatnonzero(batch.hop_count > 0)
    if own_hop:
        cols["node_id"][last] = batch.sink[with_hops]
        cols["checksum_complement"][last] = INVALID["checksum_complement"]
    ts = np.full(batch.n_reports, received_ns, np.uint64)
    for name in ("ingress_ts_ns", "egress_ts_ns"):
        value = cols[name][last]
        ok = value != INVALID[name]
        ts[with_hops[ok]] = value[ok]
    cols["ts_ns"] = ts
    return IntBatch.from_columns(cols)


def differences(got: IntBatch, want: IntBatch) -> list[str]:
    """Names of the columns that differ (empty when the batches are equal)."""
    names = [n for n, _ in REPORT_COLUMNS] + [n for n, _, _ in HOP_COLUMNS]
    return [n for n in names if not np.array_equal(getattr(got, n), getattr(want, n))]
