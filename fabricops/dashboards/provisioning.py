"""Grafana provisioning: the two data sources the dashboards read and the folder they load from.

Written next to the dashboards' JSON, for one kind of store: Prometheus and
PostgreSQL, or Prometheus and SQLite. The docker-compose deployment mounts
the PostgreSQL set's ``datasources/`` and ``dashboards/`` under Grafana's
provisioning directory and the dashboards' JSON folder at
``DASHBOARDS_PATH``. Nothing secret or site-specific is in the files: Grafana
expands ``${POSTGRES_PASSWORD}`` and ``${FABRICOPS_SQLITE_PATH}`` from its
environment when it loads them.

The SQLite data source is the ``frser-sqlite-datasource`` plugin (install it
with ``grafana-cli plugins install frser-sqlite-datasource`` or
``GF_INSTALL_PLUGINS``). It opens the store's file read-only (``mode=ro``; the
plugin adds ``_pragma=query_only(1)`` itself). The store runs in WAL mode, so
Grafana must be able to read the ``-wal`` and ``-shm`` files beside the
database and, when fabricops is not running, to create them: give it write
access to the folder, not to the file.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from fabricops.dashboards.panels import POSTGRES, PROMETHEUS, SQLITE, StoreKind

DASHBOARDS_PATH: Final = "/var/lib/grafana/dashboards"
FOLDER: Final = "fabricops"
PROMETHEUS_URL: Final = "http://prometheus:9090"
POSTGRES_ADDRESS: Final = "postgres:5432"
POSTGRES_DATABASE: Final = "fabricops"
POSTGRES_USER: Final = "fabricops"
PASSWORD_FROM_ENV: Final = "${POSTGRES_PASSWORD}"
SQLITE_PATH_FROM_ENV: Final = "${FABRICOPS_SQLITE_PATH}"
"""The store's SQLite file, an absolute path on Grafana's host."""
SQLITE_PLUGIN: Final = SQLITE.type_val
_HEADER = ("# Written by `fabricops dashboards build` from fabricops/dashboards/provisioning.py;\n"
           "# edit that module and build again rather than this file.\n")
_SQLITE_HEADER = (f"# Needs the {SQLITE_PLUGIN} plugin and FABRICOPS_SQLITE_PATH (the store's\n"
                  "# file, absolute) in Grafana's environment.\n")


def datasources(store: StoreKind = "postgresql") -> dict[str, Any]:
    """The data source provisioning document (``apiVersion: 1``): Prometheus and the
    ``store`` kind of store."""
    prometheus = {
        "name": "fabricops Prometheus", "type": PROMETHEUS.type_val, "uid": PROMETHEUS.uid,
        "access": "proxy", "url": PROMETHEUS_URL, "isDefault": True, "editable": False,
        "jsonData": {"httpMethod": "POST", "timeInterval": "15s"}}
    return {"apiVersion": 1, "datasources": [prometheus, _store_source(store)]}


def _store_source(store: StoreKind) -> dict[str, Any]:
    if store == "sqlite":
        return {"name": "fabricops SQLite", "type": SQLITE.type_val, "uid": SQLITE.uid,
                "access": "proxy", "editable": False,
                "jsonData": {"path": SQLITE_PATH_FROM_ENV, "pathPrefix": "file:",
                             "pathOptions": "mode=ro"}}
    return {"name": "fabricops PostgreSQL", "type": POSTGRES.type_val, "uid": POSTGRES.uid,
            "access": "proxy", "url": POSTGRES_ADDRESS, "user": POSTGRES_USER,
            "editable": False,
            "jsonData": {"database": POSTGRES_DATABASE, "sslmode": "disable",
                         "postgresVersion": 1500, "timescaledb": False, "maxOpenConns": 10},
            "secureJsonData": {"password": PASSWORD_FROM_ENV}}


def dashboard_providers() -> dict[str, Any]:
    """The dashboard provider document: every JSON file under ``DASHBOARDS_PATH``."""
    return {"apiVersion": 1, "providers": [
        {"name": "fabricops", "orgId": 1, "folder": FOLDER, "type": "file",
         "disableDeletion": False, "allowUiUpdates": False, "updateIntervalSeconds": 30,
         "options": {"path": DASHBOARDS_PATH, "foldersFromFilesStructure": False}},
    ]}


def provisioning_files(store: StoreKind = "postgresql") -> dict[str, str]:
    """Path relative to Grafana's provisioning directory -> YAML text, for a ``store`` kind
    of store."""
    sources_header = _HEADER + (_SQLITE_HEADER if store == "sqlite" else "")
    return {"datasources/fabricops.yaml": _yaml(datasources(store), sources_header),
            "dashboards/fabricops.yaml": _yaml(dashboard_providers(), _HEADER)}


def _yaml(document: dict[str, Any], header: str) -> str:
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
