"""Every panel query checked by the real thing: PromQL by ``promtool``, SQL by PostgreSQL
on the store's migrated schema holding one diagnosis and one action."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest
import yaml

from fabricops.core.actions import ActionState
from fabricops.dashboards import build_all, dashboard_queries
from fabricops.dashboards.queries import DashboardQuery
from fabricops.store import Store, StoreConfig
from tests.conftest import require_program
from tests.store.samples import T0, S
from tests.store.test_actions import in_state
from tests.store.test_diagnoses import diagnosis

pytestmark = pytest.mark.integration
HOUR = 3600 * S


def promql() -> list[DashboardQuery]:
    return [q for q in dashboard_queries() if q.datasource == "prometheus"]


def sql() -> list[DashboardQuery]:
    return [q for q in dashboard_queries() if q.datasource == "postgres"]


def promtool_check(expressions: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``promtool check rules`` on one recording rule per expression."""
    rules = [{"record": f"dashboard_query_{i}", "expr": e} for i, e in enumerate(expressions)]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    program = require_program("promtool", "to check the dashboards' PromQL")
    return subprocess.run([program, "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=60, check=False)


def test_promtool_accepts_every_promql_expression(tmp_path: Path) -> None:
    queries = promql()
    result = promtool_check([q.resolved() for q in queries], tmp_path)
    rules = "\n".join(f"rule {i + 1}: {q.dashboard_uid} / {q.panel_title}: {q.expression}"
                      for i, q in enumerate(queries))
    assert result.returncode == 0, f"{result.stdout}{result.stderr}\n{rules}"
    assert f"SUCCESS: {len(queries)} rules found" in result.stdout


def test_promtool_catches_a_broken_expression(tmp_path: Path) -> None:
    result = promtool_check(["sum by (link) (fabricops_link_utilization_ratio"], tmp_path)
    assert result.returncode != 0
    assert "parse error" in result.stdout + result.stderr


@pytest.fixture
def filled(postgresql_url: str) -> str:
    """A migrated store holding one incident (two revisions) and one verified action."""
    store = Store(StoreConfig(url=postgresql_url))
    store.start()
    try:
        store.put_diagnoses([diagnosis("inc-a", 5), diagnosis("inc-a", 15, confidence=0.9)])
        store.put_action(in_state(ActionState.VERIFIED, "act-a", t_s=20, incident="inc-a"))
    finally:
        store.stop()
    return postgresql_url


def run(url: str, query: DashboardQuery, start_ns: int,
        end_ns: int) -> tuple[list[str], list[tuple[object, ...]]]:
    """Column names and rows of ``query`` run over ``start_ns`` .. ``end_ns``."""
    with psycopg.connect(url) as conn:
        cursor = conn.execute(query.resolved(start_ns=start_ns, end_ns=end_ns).encode())
        return [c.name for c in cursor.description or []], cursor.fetchall()


@pytest.mark.parametrize("query", sql(), ids=lambda q: q.panel_title)
def test_every_sql_query_returns_the_stored_records(filled: str, query: DashboardQuery) -> None:
    columns, rows = run(filled, query, T0 - HOUR, T0 + HOUR)
    assert rows, f"{query.panel_title}: no rows for records inside the time range"
    target = next(t for m in build_all().values() if m["uid"] == query.dashboard_uid
                  for p in m["panels"] if p["title"] == query.panel_title
                  for t in p["targets"] if t["refId"] == query.ref_id)
    if target["format"] == "time_series":
        assert columns == ["time", "metric", "value"]
        times = [row[0] for row in rows]
        assert times == sorted(times)
    _, outside = run(filled, query, T0 + 2 * HOUR, T0 + 3 * HOUR)
    assert outside == [], f"{query.panel_title}: rows for a range after every record"
