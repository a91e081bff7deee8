"""The same run on SQLite and on a real PostgreSQL gives identical query results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fabricops.pipeline.query import read_series
from fabricops.simulator.faults import FaultSpec
from fabricops.store.store import Store, StoreConfig

from .conftest import Feed, small_sim

pytestmark = pytest.mark.integration
QUERIED = [("leaf-0-0:eth3", "in_octets"), ("leaf-0-0:eth3", "oper_status"),
           ("agg-0-0:eth1", "temperature_c"), ("host-003:nic0", "rdma_retransmits"),
           ("core-1:eth2", "queue_depth_bytes"), ("leaf-1-1:eth1", "pfc_rx_pause{prio=3}")]


def _run(url: str) -> Store:
    store = Store(StoreConfig(url=url))
    store.start()
    sim = small_sim(seed=7)
    sim.add_fault(FaultSpec(type="link_down", entity="agg-0-0:eth1~leaf-0-0:eth3", start_s=100,
                            duration_s=40))
    sim.add_fault(FaultSpec(type="gray_loss", entity="agg-1-0:eth1~leaf-1-0:eth3",
                            start_s=200, duration_s=100, params={"loss_rate": 1e-3}))
    feed = Feed(sim, store)
    feed.run(330, batch_ticks=30)
    feed.worker.flush()  # the last window was still open
    return store


def test_sqlite_and_postgresql_answer_every_query_alike(tmp_path: Path,
                                                         postgresql_url: str) -> None:
    lite, pg = _run(f"sqlite:///{tmp_path / 'f.db'}"), _run(postgresql_url)
    try:
        everything = {"t0_ns": 0, "t1_ns": 2**62}
        assert lite.segments(**everything) == pg.segments(**everything)
        assert lite.events(**everything) == pg.events(**everything)
        assert len(lite.events(**everything)) > 0
        for entity, metric in QUERIED:
            for rate in (False, True) if metric.endswith(("octets", "}", "retransmits")) else (
                    False,):
                a = read_series(lite, entity=entity, metric=metric, rate=rate, **everything)
                b = read_series(pg, entity=entity, metric=metric, rate=rate, **everything)
                assert len(a.ts_ns) >= 300, (entity, metric)
                assert np.array_equal(a.ts_ns, b.ts_ns)
                assert np.array_equal(a.values, b.values, equal_nan=rate)
    finally:
        lite.stop()
        pg.stop()
