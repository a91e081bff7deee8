"""Every SQL panel of every committed dashboard, run on the store kind it was built for.

Grafana itself is not installable here, so each SQL target of the files under
``BUILD_DIRS`` is expanded as its data source would (``DashboardQuery.resolved``:
Grafana's PostgreSQL macros, or Grafana's time variables then the SQLite
plugin's macros) and run on a store migrated and seeded by fabricops: SQLite
read-only through ``sqlite3`` as the plugin opens it, PostgreSQL on a real
server (integration). Each panel must return its columns and the seeded rows,
the same rows on both stores, and nothing for a range after every record.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fabricops.core.actions import ActionKind, ActionState
from fabricops.dashboards import BUILD_DIRS, STORE_KINDS, StoreKind
from fabricops.dashboards.queries import DashboardQuery, queries_of
from fabricops.store import Store, StoreConfig
from tests.store.samples import T0, S
from tests.store.test_actions import in_state
from tests.store.test_diagnoses import diagnosis

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3600 * S
INSIDE = (T0 - HOUR, T0 + HOUR)
AFTER = (T0 + 2 * HOUR, T0 + 3 * HOUR)
SERIES = ("time", "metric", "value")
COLUMNS: dict[str, tuple[str, ...]] = {
    "Incident onsets per minute": SERIES,
    "Diagnosis confidence": SERIES,
    "Incidents": ("last revised", "onset", "incident", "fault type", "root", "root kind",
                  "confidence", "revisions", "actions"),
    "Action moves per minute": SERIES,
    "Actions": ("created", "last change", "action", "incident", "kind", "target", "fault type",
                "state", "mode", "confidence", "request"),
    "Audit trail": ("time", "action", "kind", "target", "state", "actor", "note"),
}
"""The columns each SQL panel shows, whatever the store."""
TIMES: dict[str, tuple[str, ...]] = {
    "Incidents": ("last revised", "onset"), "Actions": ("created", "last change"),
    "Audit trail": ("time",)} | {title: ("time",) for title, c in COLUMNS.items() if c == SERIES}
"""The columns of each SQL panel that Grafana shows as times."""
RUNNERS: dict[StoreKind, str] = {"postgresql": "postgres_runner", "sqlite": "sqlite_runner"}
Rows = list[tuple[Any, ...]]
Runner = Callable[[str], tuple[list[str], Rows]]


def sql_queries(store: StoreKind) -> list[DashboardQuery]:
    """The SQL queries of the committed dashboards built for ``store``."""
    folder = ROOT / BUILD_DIRS[store][0]
    return [q for path in sorted(folder.glob("*.json"))
            for q in queries_of(json.loads(path.read_text(encoding="utf-8")))
            if q.datasource != "prometheus"]


def seed(url: str) -> None:
    """Two incidents (one revised twice) and two actions on the first, made by the store."""
    store = Store(StoreConfig(url=url))
    store.start()
    try:
        store.put_diagnoses([diagnosis("inc-a", 5), diagnosis("inc-a", 15, confidence=0.9),
                             diagnosis("inc-b", 30, root="leaf-1", fault_type="pfc_storm",
                                       confidence=0.666)])
        store.put_action(in_state(ActionState.VERIFIED, "act-a", t_s=20, incident="inc-a"))
        store.put_action(in_state(ActionState.REJECTED, "act-b", t_s=40, incident="inc-a"))
    finally:
        store.stop()


@pytest.fixture
def sqlite_runner(tmp_path: Path) -> Runner:
    """Runs SQL on a seeded SQLite store opened read-only, as the Grafana plugin opens it."""
    path = tmp_path / "fabricops.db"
    seed(f"sqlite:///{path}")

    def run(sql: str) -> tuple[list[str], Rows]:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            conn.execute("PRAGMA query_only = 1")
            cursor = conn.execute(sql)
            return [c[0] for c in cursor.description or []], cursor.fetchall()

    return run


@pytest.fixture
def postgres_runner(postgresql_url: str) -> Runner:
    """Runs SQL on a seeded store in a real PostgreSQL."""
    seed(postgresql_url)

    def run(sql: str) -> tuple[list[str], Rows]:
        with psycopg.connect(postgresql_url) as conn:
            cursor = conn.execute(sql.encode())
            return [c.name for c in cursor.description or []], cursor.fetchall()

    return run


@pytest.fixture(params=[pytest.param("postgresql", marks=pytest.mark.integration), "sqlite"])
def seeded(request: pytest.FixtureRequest) -> tuple[StoreKind, Runner]:
    """A store kind and a runner of SQL on a seeded store of that kind."""
    kind: StoreKind = request.param
    return kind, request.getfixturevalue(RUNNERS[kind])


def in_range(query: DashboardQuery, run: Runner,
             window: tuple[int, int] = INSIDE) -> tuple[list[str], Rows]:
    return run(query.resolved(start_ns=window[0], end_ns=window[1]))


def normalized(query: DashboardQuery, columns: list[str], rows: Rows) -> list[tuple[Any, ...]]:
    """Rows comparable across stores: times as epoch seconds, numbers as rounded floats,
    time series in (time, metric) order."""

    def cell(name: str, value: Any) -> Any:
        if isinstance(value, datetime):
            return round(value.timestamp(), 3)
        if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
            return round(float(value), 3 if name in query.time_columns else 6)
        return value

    cells = [tuple(cell(n, v) for n, v in zip(columns, row, strict=True)) for row in rows]
    return sorted(cells, key=lambda r: (r[0], r[1])) if query.time_series else cells


def test_every_store_kind_has_the_six_sql_panels() -> None:
    for store in STORE_KINDS:
        queries = sql_queries(store)
        assert sorted(q.panel_title for q in queries) == sorted(COLUMNS), store
        assert {q.datasource for q in queries} == {"postgres" if store == "postgresql"
                                                   else "sqlite"}
        assert all(q.time_series == (COLUMNS[q.panel_title] == SERIES) for q in queries)


def test_sqlite_targets_name_their_time_columns() -> None:
    for query in sql_queries("sqlite"):
        assert query.time_columns == TIMES[query.panel_title], query.panel_title


@pytest.mark.parametrize("title", sorted(COLUMNS))
def test_each_sql_panel_returns_its_columns_and_the_seeded_rows(
        seeded: tuple[StoreKind, Runner], title: str) -> None:
    store, run = seeded
    [query] = [q for q in sql_queries(store) if q.panel_title == title]
    columns, rows = in_range(query, run)
    assert columns == list(COLUMNS[title]), f"{store}: {title}"
    assert rows, f"{store}: {title}: no rows for the records inside the time range"
    for name in TIMES[title]:
        index = columns.index(name)
        for row in rows:
            when = row[index]
            seconds = when.timestamp() if isinstance(when, datetime) else when
            assert isinstance(seconds, int | float), f"{store}: {title}: {name} = {when!r}"
            assert INSIDE[0] / S <= seconds <= INSIDE[1] / S, f"{store}: {title}: {name}"
    if query.time_series:
        times = [row[0] for row in rows]
        assert times == sorted(times), f"{store}: {title}: series rows must come in time order"
    assert in_range(query, run, AFTER)[1] == [], f"{store}: {title}: rows after every record"


def test_the_incidents_panel_shows_the_newest_revision_and_the_actions_in_order(
        seeded: tuple[StoreKind, Runner]) -> None:
    store, run = seeded
    [query] = [q for q in sql_queries(store) if q.panel_title == "Incidents"]
    columns, rows = in_range(query, run)
    shown = [dict(zip(columns, row, strict=True)) for row in rows]
    assert [r["incident"] for r in shown] == ["inc-b", "inc-a"]
    newest = shown[1]
    assert (newest["revisions"], float(newest["confidence"])) == (2, 0.9)
    drain = ActionKind.DRAIN_LINK.value
    assert newest["actions"] == f"{drain} verified, {drain} rejected"
    assert (shown[0]["actions"], float(shown[0]["confidence"])) == (None, 0.67)


@pytest.mark.integration
def test_both_stores_show_the_same_rows_in_every_sql_panel(
        sqlite_runner: Runner, postgres_runner: Runner) -> None:
    sqlite_by_title = {q.panel_title: q for q in sql_queries("sqlite")}
    for pg_query in sql_queries("postgresql"):
        lite_query = sqlite_by_title[pg_query.panel_title]
        pg = normalized(pg_query, *in_range(pg_query, postgres_runner))
        lite = normalized(lite_query, *in_range(lite_query, sqlite_runner))
        assert lite == pg, pg_query.panel_title
