"""Downsampling old segments keeps counters exact at the kept points and every state change."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fabricops.core.catalogue import CATALOGUE
from fabricops.pipeline.keyframe import SeriesBlock, decode_block, encode_block
from fabricops.pipeline.query import read_series
from fabricops.pipeline.retention import compact, downsample
from fabricops.store.store import Store, StoreConfig

from .conftest import Feed, small_sim

S = 10**9


def _block() -> SeriesBlock:
    ts = np.arange(60, dtype=np.int64) * S + 1_000 * S
    octets = np.cumsum(np.full(60, 12_345, np.uint64)).astype(np.uint64)
    status = np.ones(60, np.uint64)
    status[17:19] = 2  # down for two seconds
    metric = np.array([CATALOGUE.id_of("in_octets"), CATALOGUE.id_of("oper_status")], np.uint16)
    return SeriesBlock(ts, ("leaf-0:eth1", "leaf-0:eth1"), metric,
                       np.vstack([octets, status]), np.ones((2, 60), bool))


def test_one_point_per_step_with_exact_counters_and_every_state_change() -> None:
    block = _block()
    small = downsample(block, 10.0)
    assert small.n_points < 20
    kept = np.searchsorted(block.ts_ns, small.ts_ns)
    assert np.array_equal(small.raw[0], block.raw[0][kept]), "counters keep exact readings"
    status = dict(zip(small.ts_ns.tolist(), small.raw[1].tolist(), strict=True))
    assert status[block.ts_ns[17]] == 2
    assert status[block.ts_ns[19]] == 1
    assert status[block.ts_ns[16]] == 1, "the change is placed at its time"
    assert decode_block(encode_block(small, 0.0)) == small


def test_step_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        downsample(_block(), 0)


def test_old_segments_are_rewritten_coarser_and_reads_still_work(tmp_path: Path) -> None:
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'r.db'}"))
    store.start()
    feed = Feed(small_sim(), store)
    feed.run(180)
    feed.worker.flush()
    entity, metric = "leaf-0-0:eth1", "out_octets"
    before = read_series(store, entity=entity, metric=metric, t0_ns=0, t1_ns=2**62)
    cutoff = int(before.ts_ns[0]) + 120 * S
    n, saved = compact(store, older_than_ns=cutoff, step_s=10)
    assert n > 0
    assert saved > 0
    after = read_series(store, entity=entity, metric=metric, t0_ns=0, t1_ns=2**62)
    old = after.ts_ns < cutoff
    assert np.count_nonzero(old) < np.count_nonzero(before.ts_ns < cutoff) / 5
    kept = np.searchsorted(before.ts_ns, after.ts_ns)
    assert np.array_equal(after.values, before.values[kept]), "counters exact where kept"
    assert np.array_equal(after.ts_ns[~old], before.ts_ns[before.ts_ns >= cutoff])
    assert compact(store, older_than_ns=cutoff, step_s=10) == (0, 0), "idempotent"
    store.stop()
