"""Every query of every panel, and how to run it outside Grafana.

Grafana expands its macros and template variables before a query reaches the
data source. ``DashboardQuery.resolved`` does the same with plain values, so
that a test can hand each expression to a real Prometheus or PostgreSQL:

- PromQL: ``$__rate_interval`` (default ``1m``) and template variables such as
  ``$link`` (default ``.*``, Grafana's "All" for the regex matchers used here);
- SQL: ``$__unixEpochNanoFilter(col)`` -> ``col >= FROM AND col <= TO``,
  ``$__unixEpochNanoFrom()`` / ``$__unixEpochNanoTo()`` -> ns since the epoch,
  ``$__timeFilter(col)`` -> ``col BETWEEN 'FROM' AND 'TO'`` (RFC 3339, UTC).

A macro that is not in this list raises ``ValueError``: a new one must be
added here before a dashboard uses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from fabricops.dashboards.panels import POSTGRES, PROMETHEUS

DatasourceKind = Literal["prometheus", "postgres"]
_TOKEN = re.compile(r"\$\{?(\w+)\}?")
_SQL_MACRO = re.compile(r"\$(__\w+)\(([^)]*)\)")
_KINDS: dict[str | None, DatasourceKind] = {PROMETHEUS.uid: "prometheus",
                                            POSTGRES.uid: "postgres"}


@dataclass(frozen=True)
class DashboardQuery:
    """One query of one panel, as Grafana stores it.

    ``expression`` is PromQL (``datasource == "prometheus"``) or SQL for
    PostgreSQL (``"postgres"``), with Grafana's macros still in it; ``macros``
    names those that occur (``"$__rate_interval"``, ``"$link"``,
    ``"$__unixEpochNanoFilter"``, ...). ``instant`` is true for a query Grafana
    runs at the end of the range only (stat and table panels).
    """

    dashboard_uid: str
    panel_title: str
    datasource: DatasourceKind
    expression: str
    ref_id: str
    macros: tuple[str, ...]
    instant: bool = False

    def resolved(self, *, start_ns: int = 0, end_ns: int = 2**62, rate_interval: str = "1m",
                 variables: Mapping[str, str] | None = None) -> str:
        """The expression with every macro and variable replaced, ready to run.

        ``start_ns`` .. ``end_ns`` is the dashboard's time range (SQL only);
        ``variables`` overrides template variables (default ``.*``, all values).
        """
        if self.datasource == "postgres":
            return resolve_sql(self.expression, start_ns=start_ns, end_ns=end_ns)
        return resolve_promql(self.expression, rate_interval=rate_interval,
                              variables=variables or {})


def resolve_promql(expr: str, *, rate_interval: str = "1m",
                   variables: Mapping[str, str] | None = None) -> str:
    """``expr`` with ``$__rate_interval`` and template variables replaced."""
    values = dict(variables or {})

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "__rate_interval":
            return rate_interval
        if name.startswith("__"):
            raise ValueError(f"PromQL {expr!r}: Grafana macro ${name} has no resolution")
        return values.get(name, ".*")

    return _TOKEN.sub(value, expr)


def resolve_sql(sql: str, *, start_ns: int, end_ns: int) -> str:
    """``sql`` with the time-range macros replaced by literals for ``start_ns`` .. ``end_ns``."""

    def value(match: re.Match[str]) -> str:
        name, arg = match.group(1), match.group(2).strip()
        if name == "__unixEpochNanoFilter":
            return f"{arg} >= {start_ns} AND {arg} <= {end_ns}"
        if name == "__unixEpochNanoFrom":
            return str(start_ns)
        if name == "__unixEpochNanoTo":
            return str(end_ns)
        if name == "__timeFilter":
            return f"{arg} BETWEEN '{_rfc3339(start_ns)}' AND '{_rfc3339(end_ns)}'"
        raise ValueError(f"SQL macro ${name} has no resolution (in {sql!r})")

    resolved = _SQL_MACRO.sub(value, sql)
    if "$" in resolved:
        raise ValueError(f"SQL {sql!r}: a Grafana macro or variable is left after resolution")
    return resolved


def _rfc3339(ns: int) -> str:
    clamped = min(max(ns // 1_000_000_000, 0), 253402300799)
    return datetime.fromtimestamp(clamped, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def macros_in(expression: str) -> tuple[str, ...]:
    """The ``$name`` macros and variables that occur in ``expression``, sorted."""
    return tuple(sorted({f"${m}" for m in _TOKEN.findall(expression)}))


def queries_of(model: Mapping[str, Any]) -> Iterator[DashboardQuery]:
    """Every target of every panel of one dashboard JSON model, in panel order."""
    for panel in model.get("panels", []):
        for target in panel.get("targets") or []:
            source = target.get("datasource") or panel.get("datasource") or {}
            kind = _KINDS.get(source.get("uid"))
            if kind is None:
                raise ValueError(f"dashboard {model.get('uid')}: panel {panel.get('title')!r} "
                                 f"reads unknown data source {source!r}")
            expression = target["expr"] if kind == "prometheus" else target["rawSql"]
            yield DashboardQuery(
                dashboard_uid=str(model["uid"]), panel_title=str(panel.get("title", "")),
                datasource=kind, expression=expression, ref_id=str(target.get("refId", "")),
                macros=macros_in(expression),
                instant=bool(target.get("instant", False)))
