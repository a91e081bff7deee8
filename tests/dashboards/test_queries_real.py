"""Every PromQL panel query checked by the real thing, ``promtool``; the SQL panels are run
on both store kinds in ``test_sql_panels``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from fabricops.dashboards import dashboard_queries
from fabricops.dashboards.queries import DashboardQuery
from tests.conftest import require_program

pytestmark = pytest.mark.integration


def promql() -> list[DashboardQuery]:
    return [q for q in dashboard_queries() if q.datasource == "prometheus"]


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
