"""Platform health at /metrics: store figures on SQLite and PostgreSQL, collectors, lag, cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import event, text

from fabricops.api.platform_metrics import (
    NewestFrameTime,
    PlatformMetrics,
    PlatformMetricsConfig,
    store_engine,
)
from fabricops.collectors.collection import CollectionStatus
from fabricops.core.actions import ActionState
from fabricops.core.faults import FaultType
from fabricops.store import Store, StoreConfig
from tests.store.conftest import BACKENDS
from tests.store.samples import DEVICES, T0, S, segment, segments
from tests.store.test_actions import in_state
from tests.store.test_diagnoses import diagnosis


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A started store on an empty database, on SQLite and on PostgreSQL in turn."""
    url = f"sqlite:///{tmp_path / 'store.db'}" if request.param == "sqlite" else \
        request.getfixturevalue("postgresql_url")
    started = Store(StoreConfig(url=url))
    started.start()
    yield started
    started.stop()


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def platform(store: Store | None = None, *, wall_ns: int = T0, cache_s: float = 5.0,
             **sources: Any) -> tuple[PlatformMetrics, CollectorRegistry, FakeClock]:
    registry = CollectorRegistry()
    clock = FakeClock(1000.0)
    pm = PlatformMetrics(PlatformMetricsConfig(cache_s=cache_s), store, registry=registry,
                         wall_ns=lambda: wall_ns, monotonic=clock, **sources)
    pm.start()
    return pm, registry, clock


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_actions_are_counted_by_state_with_every_state_present(store: Store) -> None:
    for i, state in enumerate((ActionState.PROPOSED, ActionState.PROPOSED, ActionState.APPLIED,
                               ActionState.VERIFIED)):
        store.put_action(in_state(state, f"act-{i}", t_s=i))
    _, reg, _ = platform(store)
    counts = {s.value: value(reg, "fabricops_actions", state=s.value) for s in ActionState}
    assert counts == {"proposed": 2.0, "approved": 0.0, "applied": 1.0, "verified": 1.0,
                      "rolled_back": 0.0, "failed": 0.0, "rejected": 0.0}


def test_active_diagnoses_are_incidents_revised_within_the_window(store: Store) -> None:
    store.put_diagnoses([
        diagnosis("inc-ongoing", 0), diagnosis("inc-ongoing", 30),
        diagnosis("inc-cleared", 0, fault_type="pfc_storm"),
        diagnosis("inc-retyped", 10), diagnosis("inc-retyped", 40, fault_type="link_flap"),
        diagnosis("inc-odd", 50, fault_type="healthy"),
    ])
    _, reg, _ = platform(store, wall_ns=T0 + 100 * S)
    active = {f.value: value(reg, "fabricops_diagnoses_active", fault_type=f.value)
              for f in FaultType}
    assert active["gray_loss"] == 1.0, "inc-ongoing; inc-retyped counts under its new type"
    assert active["link_flap"] == 1.0
    assert active["pfc_storm"] == 0.0, "last revised 100 s ago, past the 90 s window"
    assert sum(v or 0.0 for v in active.values()) == 2.0
    assert value(reg, "fabricops_diagnoses_active", fault_type="other") == 1.0
    _, behind, _ = platform(store, wall_ns=T0)
    assert value(behind, "fabricops_diagnoses_active", fault_type="pfc_storm") == 1.0, \
        "a fabric clock ahead of the wall clock counts from its newest revision"


def test_store_size_rows_and_compression_ratio(store: Store) -> None:
    records = segments()
    store.put_segments(records)
    _, reg, _ = platform(store)
    raw = sum(16 * r.n_points * r.n_series for r in records)
    stored = sum(len(r.payload) for r in records)
    assert value(reg, "fabricops_compression_ratio") == pytest.approx(raw / stored)
    assert value(reg, "fabricops_store_rows", table="segments") == len(records)
    assert value(reg, "fabricops_store_rows", table="actions") == 0.0
    assert value(reg, "fabricops_store_rows", table="alembic_version") is None
    size = value(reg, "fabricops_store_size_bytes")
    assert size is not None
    assert size >= stored


@pytest.mark.integration
def test_huge_postgresql_tables_are_counted_by_the_planner_estimate(postgresql_url: str) -> None:
    store = Store(StoreConfig(url=postgresql_url))
    store.start()
    try:
        store.put_segments(segments())
        engine = store_engine(store)
        assert engine is not None
        with engine.begin() as conn:
            conn.execute(text("ANALYZE segments"))
        store.put_segments([segment(d, i) for d in DEVICES for i in range(6, 10)])
        registry = CollectorRegistry()
        config = PlatformMetricsConfig(exact_count_max_rows=50)
        PlatformMetrics(config, store, registry=registry).start()
        assert value(registry, "fabricops_store_rows", table="segments") == len(segments()), \
            "the estimate of the last ANALYZE, no scan"
        assert value(registry, "fabricops_store_rows", table="actions") == 0.0
        exact = CollectorRegistry()
        PlatformMetrics(PlatformMetricsConfig(), store, registry=exact).start()
        assert value(exact, "fabricops_store_rows", table="segments") == len(segments()) + 24
    finally:
        store.stop()


def test_no_compression_ratio_before_the_first_segment(store: Store) -> None:
    _, reg, _ = platform(store)
    assert value(reg, "fabricops_compression_ratio") is None
    assert value(reg, "fabricops_store_rows", table="segments") == 0.0


def test_scrapes_within_cache_s_read_the_database_once(store: Store) -> None:
    engine = store_engine(store)
    assert engine is not None
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute",
                 lambda *args: statements.append(args[2]))
    pm, reg, clock = platform(store, cache_s=5.0)
    store.put_action(in_state(ActionState.PROPOSED, "act-a"))
    assert value(reg, "fabricops_actions", state="proposed") == 1.0
    reads = len(statements)
    assert reads > 0
    store.put_action(in_state(ActionState.PROPOSED, "act-b"))
    clock.now += 4.9
    writes = len(statements) - reads
    assert value(reg, "fabricops_actions", state="proposed") == 1.0, "served from the cache"
    assert len(statements) == reads + writes, "the second scrape did not touch the database"
    clock.now += 0.2
    assert value(reg, "fabricops_actions", state="proposed") == 2.0
    pm.stop()
    assert value(reg, "fabricops_actions", state="proposed") is None, "not read after stop"


def test_a_failed_store_read_is_counted_and_the_rest_still_served(store: Store) -> None:
    engine = store_engine(store)
    assert engine is not None
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE diagnoses"))
    newest = NewestFrameTime()
    newest.observe([], T0 - 3 * S)
    _, reg, _ = platform(store, newest_frame_ns=newest)
    assert value(reg, "fabricops_store_size_bytes") is None
    assert value(reg, "fabricops_platform_metrics_errors_total") == 1.0
    assert value(reg, "fabricops_pipeline_lag_seconds") == pytest.approx(3.0)


class FakeCollection:
    def status(self) -> CollectionStatus:
        return CollectionStatus(targets_up={"snmp": (7, 8), "gnmi": (8, 8)},
                                frames={"gnmi": 120, "snmp": 16},
                                samples={"gnmi": 9000, "snmp": 800}, int_reports=42, int_hops=99)


def test_collector_status_and_pipeline_lag() -> None:
    newest = NewestFrameTime()
    _, reg, _ = platform(None, wall_ns=T0, collection=FakeCollection(), newest_frame_ns=newest)
    assert value(reg, "fabricops_pipeline_lag_seconds") is None, "no frame accepted yet"
    newest.observe([], T0 - 2_500_000_000)
    newest.observe([], T0 - 9 * S)
    assert value(reg, "fabricops_pipeline_lag_seconds") == pytest.approx(2.5)
    assert value(reg, "fabricops_collector_targets", protocol="snmp") == 8.0
    assert value(reg, "fabricops_collector_targets_up", protocol="snmp") == 7.0
    assert value(reg, "fabricops_collector_targets_up", protocol="gnmi") == 8.0
    assert value(reg, "fabricops_collector_frames_total", protocol="gnmi") == 120.0
    assert value(reg, "fabricops_collector_frames_total", protocol="int") == 0.0
    assert value(reg, "fabricops_collector_samples_total", protocol="snmp") == 800.0
    assert value(reg, "fabricops_collector_int_reports_total") == 42.0
    assert value(reg, "fabricops_store_size_bytes") is None, "no store given"
