"""Grafana provisioning: the two data sources the dashboards read and the folder they load from.

Written by ``fabricops dashboards build`` next to the dashboards' JSON. The
docker-compose deployment mounts ``datasources/`` and ``dashboards/`` under
Grafana's provisioning directory and the dashboards' JSON folder at
``DASHBOARDS_PATH``. The PostgreSQL password is not in the file: Grafana
expands ``${POSTGRES_PASSWORD}`` from its environment when it loads it.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from fabricops.dashboards.panels import POSTGRES, PROMETHEUS

DASHBOARDS_PATH: Final = "/var/lib/grafana/dashboards"
FOLDER: Final = "fabricops"
PROMETHEUS_URL: Final = "http://prometheus:9090"
POSTGRES_ADDRESS: Final = "postgres:5432"
POSTGRES_DATABASE: Final = "fabricops"
POSTGRES_USER: Final = "fabricops"
PASSWORD_FROM_ENV: Final = "${POSTGRES_PASSWORD}"
_HEADER = ("# Written by `fabricops dashboards build` from fabricops/dashboards/provisioning.py;\n"
           "# edit that module and build again rather than this file.\n")


def datasources() -> dict[str, Any]:
    """The data source provisioning document (``apiVersion: 1``)."""
    return {"apiVersion": 1, "datasources": [
        {"name": "fabricops Prometheus", "type": PROMETHEUS.type_val, "uid": PROMETHEUS.uid,
         "access": "proxy", "url": PROMETHEUS_URL, "isDefault": True, "editable": False,
         "jsonData": {"httpMethod": "POST", "timeInterval": "15s"}},
        {"name": "fabricops PostgreSQL", "type": POSTGRES.type_val, "uid": POSTGRES.uid,
         "access": "proxy", "url": POSTGRES_ADDRESS, "user": POSTGRES_USER,
         "editable": False,
         "jsonData": {"database": POSTGRES_DATABASE, "sslmode": "disable",
                      "postgresVersion": 1500, "timescaledb": False, "maxOpenConns": 10},
         "secureJsonData": {"password": PASSWORD_FROM_ENV}},
    ]}


def dashboard_providers() -> dict[str, Any]:
    """The dashboard provider document: every JSON file under ``DASHBOARDS_PATH``."""
    return {"apiVersion": 1, "providers": [
        {"name": "fabricops", "orgId": 1, "folder": FOLDER, "type": "file",
         "disableDeletion": False, "allowUiUpdates": False, "updateIntervalSeconds": 30,
         "options": {"path": DASHBOARDS_PATH, "foldersFromFilesStructure": False}},
    ]}


def provisioning_files() -> dict[str, str]:
    """Path relative to Grafana's provisioning directory -> YAML text."""
    return {"datasources/fabricops.yaml": _yaml(datasources()),
            "dashboards/fabricops.yaml": _yaml(dashboard_providers())}


def _yaml(document: dict[str, Any]) -> str:
    return _HEADER + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
