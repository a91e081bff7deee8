"""Every query of every panel, and how to run it outside Grafana.

Grafana and the data source expand macros and template variables before a
query reaches the server. ``DashboardQuery.resolved`` does the same with plain
values, so that a test can hand each expression to a real Prometheus,
PostgreSQL or SQLite database. The time range FROM .. TO is in ns since the
epoch; Grafana's own range has ms resolution (``FROM_MS = FROM // 10**6``).

- PromQL: ``$__rate_interval`` (default ``1m``) and template variables such as
  ``$link`` (default ``.*``, Grafana's "All" for the regex matchers used here).
- PostgreSQL (Grafana's data source, its macro engine):
  ``$__unixEpochNanoFilter(col)`` -> ``col >= FROM AND col <= TO``,
  ``$__unixEpochNanoFrom()`` / ``$__unixEpochNanoTo()`` -> FROM / TO,
  ``$__timeFilter(col)`` -> ``col BETWEEN 'FROM' AND 'TO'`` (RFC 3339 with
  nanoseconds, UTC).
- SQLite (``frser-sqlite-datasource``): first Grafana's template
  interpolation of the query text, ``$__from`` / ``${__from}`` -> FROM_MS,
  ``$__to`` / ``${__to}`` -> TO_MS, ``${__from:date:seconds}`` /
  ``${__to:date:seconds}`` -> whole seconds; then the plugin's only macro,
  ``$__unixEpochGroupSeconds(expr, N[, NULL])`` -> ``cast((expr / N) as int)
  * N`` (``NULL`` asks the plugin to fill gaps in the result, the SQL is the
  same).

A macro or variable that is not in this list raises ``ValueError``: a new one
must be added here before a dashboard uses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from fabricops.dashboards.panels import POSTGRES, PROMETHEUS, SQLITE

DatasourceKind = Literal["prometheus", "postgres", "sqlite"]
_TOKEN = re.compile(r"\$\{?(\w+)\}?")
_SQL_MACRO = re.compile(r"\$(__\w+)\(([^)]*)\)")
_GRAFANA_VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)(?::([^}]+))?\}")
_KINDS: dict[str | None, DatasourceKind] = {PROMETHEUS.uid: "prometheus",
                                            POSTGRES.uid: "postgres", SQLITE.uid: "sqlite"}
_EXPRESSION_KEY: dict[DatasourceKind, str] = {"prometheus": "expr", "postgres": "rawSql",
                                              "sqlite": "rawQueryText"}
_TIME_SERIES = frozenset({"time_series", "time series"})


@dataclass(frozen=True)
class DashboardQuery:
    """One query of one panel, as Grafana stores it.

    ``expression`` is PromQL (``datasource == "prometheus"``) or SQL for
    PostgreSQL (``"postgres"``) or SQLite (``"sqlite"``), with Grafana's macros
    still in it; ``macros`` names those that occur (``"$__rate_interval"``,
    ``"$link"``, ``"$__unixEpochNanoFilter"``, ``"$__from"``, ...). ``instant``
    is true for a query Grafana runs at the end of the range only (stat and
    table panels). ``time_series`` is true for a SQL query whose rows
    (``time``, ``metric``, ``value``) Grafana turns into series;
    ``time_columns`` are the columns a SQLite query returns as seconds since
    the epoch for the plugin to turn into times.
    """

    dashboard_uid: str
    panel_title: str
    datasource: DatasourceKind
    expression: str
    ref_id: str
    macros: tuple[str, ...]
    instant: bool = False
    time_series: bool = False
    time_columns: tuple[str, ...] = ()

    def resolved(self, *, start_ns: int = 0, end_ns: int = 2**62, rate_interval: str = "1m",
                 variables: Mapping[str, str] | None = None) -> str:
        """The expression with every macro and variable replaced, ready to run.

        ``start_ns`` .. ``end_ns`` is the dashboard's time range (SQL only);
        ``variables`` overrides template variables (default ``.*``, all values).
        """
        if self.datasource == "postgres":
            return resolve_sql(self.expression, start_ns=start_ns, end_ns=end_ns)
        if self.datasource == "sqlite":
            return resolve_sqlite(self.expression, start_ns=start_ns, end_ns=end_ns)
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
            return f"{arg} BETWEEN '{_rfc3339_nano(start_ns)}' AND '{_rfc3339_nano(end_ns)}'"
        raise ValueError(f"SQL macro ${name} has no resolution (in {sql!r})")

    return _all_resolved(sql, _SQL_MACRO.sub(value, sql))


def resolve_sqlite(sql: str, *, start_ns: int, end_ns: int) -> str:
    """``sql`` as the SQLite plugin runs it over ``start_ns`` .. ``end_ns``: Grafana's
    time variables interpolated, then the plugin's macros expanded."""
    millis = {"__from": start_ns // 1_000_000, "__to": end_ns // 1_000_000}

    def variable(match: re.Match[str]) -> str:
        name, fmt = match.group(1) or match.group(2), match.group(3)
        if name not in millis or fmt not in (None, "date:seconds"):
            return match.group(0)
        return str(millis[name] // 1000 if fmt else millis[name])

    def macro(match: re.Match[str]) -> str:
        name, args = match.group(1), match.group(2).split(",")
        if name != "__unixEpochGroupSeconds" or not 2 <= len(args) <= 3:
            raise ValueError(f"SQLite macro ${name}({match.group(2)}) has no resolution "
                             f"(in {sql!r})")
        if len(args) == 3 and args[2].strip().lower() != "null":
            raise ValueError(f"SQLite macro ${name}: gap filling by {args[2].strip()!r}")
        seconds = int(args[1].strip())
        return f"cast(({args[0]} / {seconds}) as int) * {seconds}"

    interpolated = _GRAFANA_VARIABLE.sub(variable, sql)
    return _all_resolved(sql, _SQL_MACRO.sub(macro, interpolated))


def _all_resolved(sql: str, resolved: str) -> str:
    if "$" in resolved:
        raise ValueError(f"SQL {sql!r}: a Grafana macro or variable is left after resolution")
    return resolved


def _rfc3339_nano(ns: int) -> str:
    """Go's ``time.RFC3339Nano`` in UTC: fraction of a second without trailing zeros."""
    seconds, fraction = divmod(min(max(ns, 0), 253402300799 * 10**9), 10**9)
    text = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{fraction:09d}".rstrip("0") if fraction else "") + "Z"


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
            expression = target[_EXPRESSION_KEY[kind]]
            yield DashboardQuery(
                dashboard_uid=str(model["uid"]), panel_title=str(panel.get("title", "")),
                datasource=kind, expression=expression, ref_id=str(target.get("refId", "")),
                macros=macros_in(expression),
                instant=bool(target.get("instant", False)),
                time_series=target.get("format", target.get("queryType")) in _TIME_SERIES,
                time_columns=tuple(target.get("timeColumns", ())))
