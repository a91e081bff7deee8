"""fabricops' Grafana dashboards, built as code with grafana-foundation-sdk.

``DASHBOARDS`` lists every dashboard once (file name -> builder for a store
kind). The panels that read the store are built for one kind of store
(``STORE_KINDS``: PostgreSQL or SQLite), each with its own data source and
SQL; the Prometheus panels are the same for both. ``build_all`` renders the
dashboards for a store kind to Grafana's JSON model, ``dashboard_queries``
lists every panel query (PromQL or SQL) so that tests can run them against
real servers, and ``write_dashboards`` / ``write_provisioning`` write the
files. The repository keeps them where ``BUILD_DIRS`` says: the PostgreSQL
set (the docker-compose deployment's) in ``dashboards/json`` and
``dashboards/provisioning``, the SQLite set under ``dashboards/sqlite/``.
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
from fabricops.dashboards.panels import STORE_KINDS, StoreKind, render
from fabricops.dashboards.provisioning import provisioning_files
from fabricops.dashboards.queries import DashboardQuery, queries_of


def _any_store(build: Callable[[], Dashboard]) -> Callable[[StoreKind], Dashboard]:
    """The builder of a dashboard that reads Prometheus only: the same for every store."""
    return lambda _store: build()


DASHBOARDS: Final[Mapping[str, Callable[[StoreKind], Dashboard]]] = MappingProxyType({
    overview.FILE_NAME: _any_store(overview.build),
    link_health.FILE_NAME: _any_store(link_health.build),
    timeline.FILE_NAME: timeline.build,
    collectors.FILE_NAME: _any_store(collectors.build),
})

BUILD_DIRS: Final[Mapping[StoreKind, tuple[Path, Path]]] = MappingProxyType({
    "postgresql": (Path("dashboards/json"), Path("dashboards/provisioning")),
    "sqlite": (Path("dashboards/sqlite/json"), Path("dashboards/sqlite/provisioning")),
})
"""Store kind -> (dashboards' JSON folder, provisioning folder), relative to the
repository's root, where the built files are kept."""


def build_all(store: StoreKind = "postgresql") -> dict[str, dict[str, Any]]:
    """File name -> dashboard JSON model for a ``store`` kind of store, for every dashboard,
    in ``DASHBOARDS`` order."""
    return {name: render(build(store)) for name, build in DASHBOARDS.items()}


def dashboard_text(model: Mapping[str, Any]) -> str:
    """The file text of one dashboard: sorted keys, two-space indent, trailing newline."""
    return json.dumps(model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def dashboard_queries(store: StoreKind = "postgresql") -> list[DashboardQuery]:
    """Every query of every panel of every dashboard for a ``store`` kind of store
    (template variable queries excluded)."""
    return [query for model in build_all(store).values() for query in queries_of(model)]


def write_dashboards(out_dir: Path, store: StoreKind = "postgresql") -> list[Path]:
    """Write every dashboard's JSON for a ``store`` kind of store under ``out_dir``
    (created if missing); the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in build_all(store).items():
        path = out_dir / name
        path.write_text(dashboard_text(model), encoding="utf-8")
        written.append(path)
    return written


def write_provisioning(out_dir: Path, store: StoreKind = "postgresql") -> list[Path]:
    """Write the data source (Prometheus and the ``store`` kind of store) and dashboard
    provider YAML under ``out_dir``; the paths."""
    written = []
    for name, text in provisioning_files(store).items():
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


__all__ = ["BUILD_DIRS", "DASHBOARDS", "METRICS", "METRIC_NAMES", "STORE_KINDS",
           "DashboardQuery", "StoreKind", "build_all", "dashboard_queries", "dashboard_text",
           "write_dashboards", "write_provisioning"]
