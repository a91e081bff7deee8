"""fabricops' Grafana dashboards, built as code with grafana-foundation-sdk.

``DASHBOARDS`` lists every dashboard once (file name -> builder). ``build_all``
renders them to Grafana's JSON model, ``dashboard_queries`` lists every panel
query (PromQL or SQL) so that tests can run them against real servers, and
``write_dashboards`` / ``write_provisioning`` write the files that
``fabricops dashboards build`` commits under ``dashboards/``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from grafana_foundation_sdk.builders.dashboard import Dashboard

from fabricops.dashboards import collectors, link_health, overview, timeline
from fabricops.dashboards.contract import METRIC_NAMES, METRICS
from fabricops.dashboards.panels import render
from fabricops.dashboards.provisioning import provisioning_files
from fabricops.dashboards.queries import DashboardQuery, queries_of

DASHBOARDS: Final[Mapping[str, Callable[[], Dashboard]]] = MappingProxyType({
    overview.FILE_NAME: overview.build,
    link_health.FILE_NAME: link_health.build,
    timeline.FILE_NAME: timeline.build,
    collectors.FILE_NAME: collectors.build,
})


def build_all() -> dict[str, dict[str, Any]]:
    """File name -> dashboard JSON model, for every dashboard, in ``DASHBOARDS`` order."""
    return {name: render(build()) for name, build in DASHBOARDS.items()}


def dashboard_text(model: Mapping[str, Any]) -> str:
    """The file text of one dashboard: sorted keys, two-space indent, trailing newline."""
    return json.dumps(model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def dashboard_queries() -> list[DashboardQuery]:
    """Every query of every panel of every dashboard (template variable queries excluded)."""
    return [query for model in build_all().values() for query in queries_of(model)]


def write_dashboards(out_dir: Path) -> list[Path]:
    """Write every dashboard's JSON under ``out_dir`` (created if missing); the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in build_all().items():
        path = out_dir / name
        path.write_text(dashboard_text(model), encoding="utf-8")
        written.append(path)
    return written


def write_provisioning(out_dir: Path) -> list[Path]:
    """Write the data source and dashboard provider YAML under ``out_dir``; the paths."""
    written = []
    for name, text in provisioning_files().items():
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


__all__ = ["DASHBOARDS", "METRICS", "METRIC_NAMES", "DashboardQuery", "build_all",
           "dashboard_queries", "dashboard_text", "write_dashboards", "write_provisioning"]
