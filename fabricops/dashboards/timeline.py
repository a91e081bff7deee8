"""RCA and remediation timeline: what was diagnosed, what fabricops did, and who decided.

The live counts come from Prometheus; the history from the store's tables
``diagnoses``, ``actions`` and ``action_log``, read through the data source of
the store's kind (PostgreSQL or SQLite) with the SQL of ``timeline_sql``.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from fabricops.dashboards.panels import (
    STORE_SOURCES,
    PanelBuilder,
    SqlQuery,
    StoreKind,
    new_dashboard,
    prom,
    sql,
    stat_panel,
    table_panel,
    timeseries_panel,
)
from fabricops.dashboards.timeline_sql import (
    ACTIONS,
    AUDIT,
    CONFIDENCE,
    INCIDENTS,
    MOVES,
    ONSETS,
    StoreSql,
)

UID = "fabricops-rca-timeline"
FILE_NAME = "rca-remediation-timeline.json"
ANY_IS_BAD = (("green", None), ("red", 1))
SERIES_NAME = "${__field.labels.metric}"
"""SQLite series are named by their ``metric`` label, as PostgreSQL names them."""

def build(store: StoreKind = "postgresql") -> dashboard.Dashboard:
    """The RCA and remediation timeline dashboard (uid ``fabricops-rca-timeline``) for a
    store of kind ``store``."""
    return new_dashboard(
        UID, "RCA and remediation timeline",
        "Incidents the root-cause analysis diagnosed, the remediation actions taken on "
        "them and their audit trail; live counts above, the store's history below.",
        [("Now", _now()), ("Diagnoses", _diagnoses(store)),
         ("Remediation", _remediation(store))],
        time_from="now-6h")


def _target(store: StoreKind, query: StoreSql, *, time_series: bool = False) -> SqlQuery:
    return sql(store, query.text(store), time_series=time_series,
               time_columns=query.time_columns)


def _series_name(store: StoreKind) -> str | None:
    return SERIES_NAME if store == "sqlite" else None


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


def _diagnoses(store: StoreKind) -> list[PanelBuilder]:
    source = STORE_SOURCES[store]
    return [
        timeseries_panel(
            "Incident onsets per minute", "Incidents by the minute their fault began, by "
            "fault type.", _target(store, ONSETS, time_series=True),
            datasource=source, bars=True, stacked=True, display_name=_series_name(store)),
        timeseries_panel(
            "Diagnosis confidence", "Confidence of each revision, one line per fault type "
            "and root entity: how the diagnosis firmed up (or changed its mind).",
            _target(store, CONFIDENCE, time_series=True),
            datasource=source, unit="percentunit", max_value=1,
            display_name=_series_name(store)),
        table_panel(
            "Incidents", "The newest revision of every incident revised in the time range, "
            "with the actions proposed for it.", _target(store, INCIDENTS), datasource=source),
    ]


def _remediation(store: StoreKind) -> list[PanelBuilder]:
    source = STORE_SOURCES[store]
    return [
        timeseries_panel(
            "Action moves per minute", "State changes of remediation actions, by the state "
            "entered.", _target(store, MOVES, time_series=True),
            datasource=source, width=24, height=6, bars=True, stacked=True,
            display_name=_series_name(store)),
        table_panel(
            "Actions", "Actions alive in the time range (created before its end, changed "
            "after its start), last changed first.", _target(store, ACTIONS),
            datasource=source),
        table_panel(
            "Audit trail", "Every move of every action: who (policy, safety, verifier, "
            "operator:NAME) moved it to which state, and why.",
            _target(store, AUDIT), datasource=source, height=10),
    ]
