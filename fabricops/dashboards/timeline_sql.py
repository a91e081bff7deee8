"""The timeline's SQL panels, each written once per store kind.

The store's ``diagnoses``, ``actions`` and ``action_log`` tables keep times as
ns since the epoch (BIGINT on PostgreSQL, INTEGER on SQLite). Both dialects
filter on those columns directly, so the indexes serve the time range, and
return the same rows and columns for the same data:

- PostgreSQL (Grafana's data source): the range by ``$__unixEpochNanoFilter``,
  ``$__unixEpochNanoFrom()`` and ``$__unixEpochNanoTo()``; times shown as
  ``to_timestamp(col / 1e9)``; one row per incident by ``DISTINCT ON``.
- SQLite (``frser-sqlite-datasource``, which has no time-range macro): the
  range from Grafana's ``$__from`` / ``$__to`` (ms since the epoch, times
  1e6 for ns); times shown as seconds since the epoch (``col / 1e9``) in the
  columns named by ``time_columns``, which the plugin turns into times;
  minutes grouped by the plugin's ``$__unixEpochGroupSeconds``; one row per
  incident by ``row_number()``; no ``string_agg`` (``group_concat`` over the
  ordered rows) and ``round`` on the REAL column itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricops.dashboards.panels import StoreKind


@dataclass(frozen=True)
class StoreSql:
    """One panel's query for each store kind; ``time_columns`` are the result's columns
    that hold times (timestamps on PostgreSQL, seconds since the epoch on SQLite)."""

    postgresql: str
    sqlite: str
    time_columns: tuple[str, ...]

    def text(self, store: StoreKind) -> str:
        """The query in ``store``'s dialect."""
        return self.postgresql if store == "postgresql" else self.sqlite


def _sqlite_in_range(column: str) -> str:
    """``column`` (ns) within the dashboard's range, from ``$__from`` / ``$__to`` (ms)."""
    return f"{column} >= $__from * 1000000 AND {column} <= $__to * 1000000"


INCIDENTS = StoreSql(
    postgresql="""
SELECT to_timestamp(d.ts_ns / 1e9) AS "last revised", to_timestamp(d.onset_ns / 1e9) AS onset,
       d.diagnosis_id AS incident, d.fault_type AS "fault type", d.root,
       d.root_kind AS "root kind", round(d.confidence::numeric, 2) AS confidence,
       d.revisions,
       (SELECT string_agg(a.kind || ' ' || a.state, ', ' ORDER BY a.created_ns)
          FROM actions AS a WHERE a.diagnosis_id = d.diagnosis_id) AS actions
FROM (SELECT DISTINCT ON (diagnosis_id) diagnosis_id, ts_ns, onset_ns, fault_type, root,
             root_kind, confidence, count(*) OVER (PARTITION BY diagnosis_id) AS revisions
        FROM diagnoses WHERE $__unixEpochNanoFilter(ts_ns)
       ORDER BY diagnosis_id, ts_ns DESC) AS d
ORDER BY d.ts_ns DESC LIMIT 500
""",
    sqlite=f"""
SELECT d.ts_ns / 1e9 AS "last revised", d.onset_ns / 1e9 AS onset,
       d.diagnosis_id AS incident, d.fault_type AS "fault type", d.root,
       d.root_kind AS "root kind", round(d.confidence, 2) AS confidence,
       d.revisions,
       (SELECT group_concat(a.kind || ' ' || a.state, ', ')
          FROM (SELECT kind, state FROM actions WHERE diagnosis_id = d.diagnosis_id
                 ORDER BY created_ns) AS a) AS actions
FROM (SELECT diagnosis_id, ts_ns, onset_ns, fault_type, root, root_kind, confidence,
             row_number() OVER (PARTITION BY diagnosis_id ORDER BY ts_ns DESC) AS newest,
             count(*) OVER (PARTITION BY diagnosis_id) AS revisions
        FROM diagnoses WHERE {_sqlite_in_range("ts_ns")}) AS d
WHERE d.newest = 1
ORDER BY d.ts_ns DESC LIMIT 500
""",
    time_columns=("last revised", "onset"))

CONFIDENCE = StoreSql(
    postgresql="""
SELECT to_timestamp(ts_ns / 1e9) AS time, fault_type || ' @ ' || root AS metric,
       confidence AS value
FROM diagnoses WHERE $__unixEpochNanoFilter(ts_ns) ORDER BY ts_ns
""",
    sqlite=f"""
SELECT ts_ns / 1e9 AS time, fault_type || ' @ ' || root AS metric, confidence AS value
FROM diagnoses WHERE {_sqlite_in_range("ts_ns")} ORDER BY ts_ns
""",
    time_columns=("time",))

ONSETS = StoreSql(
    postgresql="""
SELECT to_timestamp(floor(onset_ns / 60e9) * 60) AS time, fault_type AS metric,
       count(DISTINCT diagnosis_id) AS value
FROM diagnoses WHERE $__unixEpochNanoFilter(onset_ns) GROUP BY 1, 2 ORDER BY 1
""",
    sqlite=f"""
SELECT $__unixEpochGroupSeconds(onset_ns / 1000000000, 60) AS time, fault_type AS metric,
       count(DISTINCT diagnosis_id) AS value
FROM diagnoses WHERE {_sqlite_in_range("onset_ns")} GROUP BY 1, 2 ORDER BY 1
""",
    time_columns=("time",))

ACTIONS = StoreSql(
    postgresql="""
SELECT to_timestamp(created_ns / 1e9) AS created, to_timestamp(ts_ns / 1e9) AS "last change",
       id AS action, diagnosis_id AS incident, kind, target, fault_type AS "fault type",
       state, mode, round(confidence::numeric, 2) AS confidence, request
FROM actions
WHERE created_ns <= $__unixEpochNanoTo() AND ts_ns >= $__unixEpochNanoFrom()
ORDER BY ts_ns DESC LIMIT 500
""",
    sqlite="""
SELECT created_ns / 1e9 AS created, ts_ns / 1e9 AS "last change",
       id AS action, diagnosis_id AS incident, kind, target, fault_type AS "fault type",
       state, mode, round(confidence, 2) AS confidence, request
FROM actions
WHERE created_ns <= $__to * 1000000 AND ts_ns >= $__from * 1000000
ORDER BY ts_ns DESC LIMIT 500
""",
    time_columns=("created", "last change"))

MOVES = StoreSql(
    postgresql="""
SELECT to_timestamp(floor(ts_ns / 60e9) * 60) AS time, state AS metric, count(*) AS value
FROM action_log WHERE $__unixEpochNanoFilter(ts_ns) GROUP BY 1, 2 ORDER BY 1
""",
    sqlite=f"""
SELECT $__unixEpochGroupSeconds(ts_ns / 1000000000, 60) AS time, state AS metric,
       count(*) AS value
FROM action_log WHERE {_sqlite_in_range("ts_ns")} GROUP BY 1, 2 ORDER BY 1
""",
    time_columns=("time",))

AUDIT = StoreSql(
    postgresql="""
SELECT to_timestamp(l.ts_ns / 1e9) AS time, l.action_id AS action, a.kind, a.target, l.state,
       l.actor, l.note
FROM action_log AS l JOIN actions AS a ON a.id = l.action_id
WHERE $__unixEpochNanoFilter(l.ts_ns)
ORDER BY l.ts_ns DESC, l.seq DESC LIMIT 1000
""",
    sqlite=f"""
SELECT l.ts_ns / 1e9 AS time, l.action_id AS action, a.kind, a.target, l.state,
       l.actor, l.note
FROM action_log AS l JOIN actions AS a ON a.id = l.action_id
WHERE {_sqlite_in_range("l.ts_ns")}
ORDER BY l.ts_ns DESC, l.seq DESC LIMIT 1000
""",
    time_columns=("time",))
