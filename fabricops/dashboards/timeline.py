"""RCA and remediation timeline: what was diagnosed, what fabricops did, and who decided.

The live counts come from Prometheus; the history from the store's tables
``diagnoses``, ``actions`` and ``action_log`` in PostgreSQL, whose times are
ns since the epoch (BIGINT). Queries filter those columns with
``$__unixEpochNanoFilter`` (the index is used) and show them with
``to_timestamp(col / 1e9)``.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from fabricops.dashboards.panels import (
    POSTGRES,
    PanelBuilder,
    new_dashboard,
    prom,
    sql,
    stat_panel,
    table_panel,
    timeseries_panel,
)

UID = "fabricops-rca-timeline"
FILE_NAME = "rca-remediation-timeline.json"
ANY_IS_BAD = (("green", None), ("red", 1))

INCIDENTS_SQL = """
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
"""
CONFIDENCE_SQL = """
SELECT to_timestamp(ts_ns / 1e9) AS time, fault_type || ' @ ' || root AS metric,
       confidence AS value
FROM diagnoses WHERE $__unixEpochNanoFilter(ts_ns) ORDER BY ts_ns
"""
ONSETS_SQL = """
SELECT to_timestamp(floor(onset_ns / 60e9) * 60) AS time, fault_type AS metric,
       count(DISTINCT diagnosis_id) AS value
FROM diagnoses WHERE $__unixEpochNanoFilter(onset_ns) GROUP BY 1, 2 ORDER BY 1
"""
ACTIONS_SQL = """
SELECT to_timestamp(created_ns / 1e9) AS created, to_timestamp(ts_ns / 1e9) AS "last change",
       id AS action, diagnosis_id AS incident, kind, target, fault_type AS "fault type",
       state, mode, round(confidence::numeric, 2) AS confidence, request
FROM actions
WHERE created_ns <= $__unixEpochNanoTo() AND ts_ns >= $__unixEpochNanoFrom()
ORDER BY ts_ns DESC LIMIT 500
"""
MOVES_SQL = """
SELECT to_timestamp(floor(ts_ns / 60e9) * 60) AS time, state AS metric, count(*) AS value
FROM action_log WHERE $__unixEpochNanoFilter(ts_ns) GROUP BY 1, 2 ORDER BY 1
"""
AUDIT_SQL = """
SELECT to_timestamp(l.ts_ns / 1e9) AS time, l.action_id AS action, a.kind, a.target, l.state,
       l.actor, l.note
FROM action_log AS l JOIN actions AS a ON a.id = l.action_id
WHERE $__unixEpochNanoFilter(l.ts_ns)
ORDER BY l.ts_ns DESC, l.seq DESC LIMIT 1000
"""


def build() -> dashboard.Dashboard:
    """The RCA and remediation timeline dashboard (uid ``fabricops-rca-timeline``)."""
    return new_dashboard(
        UID, "RCA and remediation timeline",
        "Incidents the root-cause analysis diagnosed, the remediation actions taken on "
        "them and their audit trail; live counts above, the store's history below.",
        [("Now", _now()), ("Diagnoses", _diagnoses()), ("Remediation", _remediation())],
        time_from="now-6h")


def _now() -> list[PanelBuilder]:
    return [
        stat_panel("Open incidents", "Incidents revised within the active window.",
                   "sum(fabricops_diagnoses_active)", steps=ANY_IS_BAD,
                   width=6),
        stat_panel("Diagnoses in the last 5 minutes", "Diagnoses (new incidents and "
                   "revisions) the root-cause analysis published.",
                   "sum(increase(fabricops_rca_diagnoses_total[5m]))",
                   width=6),
        stat_panel("Actions awaiting approval", "Proposed actions waiting for a person.",
                   'sum(fabricops_actions{state="proposed"})',
                   steps=(("green", None), ("orange", 1)), width=6),
        stat_panel("Actions failed or rolled back", "Remedies that did not clear the "
                   "symptom or could not be applied; see the audit trail below.",
                   'sum(fabricops_actions{state=~"failed|rolled_back"})',
                   steps=ANY_IS_BAD, width=6),
        timeseries_panel(
            "Open incidents by fault type", "Incidents within the active window.",
            prom("sum by (fault_type) (fabricops_diagnoses_active)", "{{fault_type}}"),
            width=8, stacked=True),
        timeseries_panel(
            "Actions by state", "Remediation actions in each state.",
            prom("sum by (state) (fabricops_actions)", "{{state}}"), width=8),
        timeseries_panel(
            "Diagnoses published per 5 minutes", "New incidents and their revisions.",
            prom("sum(increase(fabricops_rca_diagnoses_total[5m]))", "diagnoses"),
            width=8, bars=True),
    ]


def _diagnoses() -> list[PanelBuilder]:
    return [
        timeseries_panel(
            "Incident onsets per minute", "Incidents by the minute their fault began, by "
            "fault type.", sql(ONSETS_SQL, time_series=True),
            datasource=POSTGRES, bars=True, stacked=True),
        timeseries_panel(
            "Diagnosis confidence", "Confidence of each revision, one line per fault type "
            "and root entity: how the diagnosis firmed up (or changed its mind).",
            sql(CONFIDENCE_SQL, time_series=True),
            datasource=POSTGRES, unit="percentunit", max_value=1),
        table_panel(
            "Incidents", "The newest revision of every incident revised in the time range, "
            "with the actions proposed for it.", sql(INCIDENTS_SQL), datasource=POSTGRES),
    ]


def _remediation() -> list[PanelBuilder]:
    return [
        timeseries_panel(
            "Action moves per minute", "State changes of remediation actions, by the state "
            "entered.", sql(MOVES_SQL, time_series=True),
            datasource=POSTGRES, width=24, height=6, bars=True, stacked=True),
        table_panel(
            "Actions", "Actions alive in the time range (created before its end, changed "
            "after its start), last changed first.", sql(ACTIONS_SQL), datasource=POSTGRES),
        table_panel(
            "Audit trail", "Every move of every action: who (policy, safety, verifier, "
            "operator:NAME) moved it to which state, and why.",
            sql(AUDIT_SQL), datasource=POSTGRES, height=10),
    ]
