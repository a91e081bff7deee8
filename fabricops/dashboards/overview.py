"""Fabric overview: is the fabric healthy, where is it hot, and what is fabricops doing about it."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from fabricops.dashboards.panels import (
    PanelBuilder,
    new_dashboard,
    prom,
    stat_panel,
    timeseries_panel,
)

UID = "fabricops-overview"
FILE_NAME = "fabric-overview.json"
TOP = 10
HOT = (("green", None), ("orange", 0.7), ("red", 0.9))
ANY_IS_BAD = (("green", None), ("red", 1))


def build() -> dashboard.Dashboard:
    """The fabric overview dashboard (uid ``fabricops-overview``)."""
    return new_dashboard(
        UID, "Fabric overview",
        "Links up and down, the hottest links and switches, open incidents, remediation "
        "actions and the telemetry ingest rate, for the whole fabric.",
        [("Now", _now()), (f"Hot spots (top {TOP})", _hot_spots()),
         ("Incidents and remediation", _operations())])


def _now() -> list[PanelBuilder]:
    return [
        stat_panel("Links up", "Fabric links whose both ends are operationally up.",
                   'sum(fabricops_fabric_links{state="up"})'),
        stat_panel("Links down", "Fabric links with an end operationally down. Every one "
                   "removes ECMP paths; the Link health dashboard shows which.",
                   'sum(fabricops_fabric_links{state="down"})',
                   steps=ANY_IS_BAD),
        stat_panel("Hottest link", "Utilization of the busiest link (higher of its two "
                   "directions). Above 90 % collectives slow down and PFC pauses start.",
                   "max(fabricops_link_utilization_ratio)",
                   unit="percentunit", steps=HOT, graph=True),
        stat_panel("Open incidents", "Incidents the root-cause analysis diagnosed and "
                   "revised within the active window.",
                   "sum(fabricops_diagnoses_active)", steps=ANY_IS_BAD),
        stat_panel("Actions awaiting approval", "Remediation actions proposed and waiting "
                   "for a person: fabricops actions list --state proposed.",
                   'sum(fabricops_actions{state="proposed"})',
                   steps=(("green", None), ("orange", 1))),
        stat_panel("Ingest rate", "Samples per second published by all collectors.",
                   "sum(rate(fabricops_collector_samples_total[$__rate_interval]))",
                   unit="cps", graph=True),
    ]


def _hot_spots() -> list[PanelBuilder]:
    return [
        timeseries_panel(
            "Hottest links: utilization", f"The {TOP} busiest links at each instant "
            "(higher of the two directions). One link far above its ECMP siblings is hash "
            "polarization or a drained neighbour.",
            prom(f"topk({TOP}, fabricops_link_utilization_ratio)", "{{link}}"),
            unit="percentunit", max_value=1, steps=HOT),
        timeseries_panel(
            "Links with errors", f"The {TOP} links with the most input and FCS errors per "
            "second (both ends). RoCE retransmits go-back-N: a small error rate costs a "
            "training job much of its throughput.",
            prom(f"topk({TOP}, rate(fabricops_link_errors_total[$__rate_interval]) > 0)",
                 "{{link}}"),
            steps=ANY_IS_BAD),
        timeseries_panel(
            "PFC pauses by switch", f"PFC pause frames per second (received and sent) of the "
            f"{TOP} most pausing switches. A switch that pauses far more than its peers is "
            "next to a pause storm, a slow receiver or incast.",
            prom(f"topk({TOP}, sum by (device) "
                 "(rate(fabricops_switch_pfc_pauses_total[$__rate_interval])))", "{{device}}")),
        timeseries_panel(
            "ECN marks by switch", f"ECN-marked packets per second of the {TOP} most marking "
            "switches: congestion that DCQCN is reacting to.",
            prom(f"topk({TOP}, sum by (device) "
                 "(rate(fabricops_switch_ecn_marked_packets_total[$__rate_interval])))",
                 "{{device}}"),
            unit="pps"),
    ]


def _operations() -> list[PanelBuilder]:
    return [
        timeseries_panel(
            "Open incidents by fault type", "Incidents within the active window, by the "
            "fault type the root-cause analysis gave them.",
            prom("sum by (fault_type) (fabricops_diagnoses_active)", "{{fault_type}}"),
            width=8, stacked=True),
        timeseries_panel(
            "Actions by state", "Remediation actions in each state (proposed, approved, "
            "applied, verified, rolled_back, failed, rejected).",
            prom("sum by (state) (fabricops_actions)", "{{state}}"), width=8),
        timeseries_panel(
            "Ingest rate by protocol", "Samples per second published by the SNMP, gNMI and "
            "INT collectors.",
            prom("sum by (protocol) (rate(fabricops_collector_samples_total[$__rate_interval]))",
                 "{{protocol}}"),
            width=8, unit="cps", stacked=True),
    ]
