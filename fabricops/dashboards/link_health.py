"""Link health: utilization, errors and optics per link; PFC, ECN and discards per switch.

Template variables ``link`` and ``switch`` pick the links and switches shown
(all by default).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from fabricops.dashboards.panels import (
    PROMETHEUS,
    PanelBuilder,
    new_dashboard,
    prom,
    query_variable,
    table_panel,
    timeseries_panel,
)

UID = "fabricops-link-health"
FILE_NAME = "link-health.json"
LINKS = 'link=~"$link"'
SWITCHES = 'device=~"$device"'
RATE = "[$__rate_interval]"
TOP = 20


def build() -> dashboard.Dashboard:
    """The link health dashboard (uid ``fabricops-link-health``)."""
    return new_dashboard(
        UID, "Link health",
        "Per link: utilization, errors and optical receive power. Per switch: PFC pause "
        "frames received and sent, ECN marks and discards. Pick links and switches above.",
        [("Links", _links()), ("Switches", _switches())],
        variables=[
            query_variable("link", "Link",
                           "label_values(fabricops_link_utilization_ratio, link)"),
            query_variable("device", "Switch",
                           "label_values(fabricops_switch_pfc_pauses_total, device)"),
        ])


def _links() -> list[PanelBuilder]:
    return [
        timeseries_panel(
            "Utilization", "Higher of the link's two directions, transmitted bits over "
            "capacity.",
            prom(f"fabricops_link_utilization_ratio{{{LINKS}}}", "{{link}}"),
            unit="percentunit", max_value=1,
            steps=(("green", None), ("orange", 0.7), ("red", 0.9))),
        timeseries_panel(
            "Errors", "Input and FCS errors per second, both ends summed. Any steady rate "
            "is a gray failure: a dirty or failing optic, or a bad cable.",
            prom(f"rate(fabricops_link_errors_total{{{LINKS}}}{RATE})", "{{link}}"),
            steps=(("green", None), ("red", 1))),
        timeseries_panel(
            "Optical receive power", "The lower of the two ends' receive power. A slow "
            "decline announces an optic that will soon corrupt frames.",
            prom(f"fabricops_link_rx_power_dbm{{{LINKS}}}", "{{link}}"),
            unit="dBm", min_value=None,
            steps=(("red", None), ("orange", -10), ("green", -7))),
        table_panel(
            "Weakest optics", f"The {TOP} links with the lowest receive power now.",
            prom(f"bottomk({TOP}, fabricops_link_rx_power_dbm{{{LINKS}}})",
                 instant=True, as_table=True),
            datasource=PROMETHEUS, unit="dBm", width=12, sort_by="Value", descending=False),
        table_panel(
            "Busiest links", f"The {TOP} links with the highest utilization now.",
            prom(f"topk({TOP}, fabricops_link_utilization_ratio{{{LINKS}}})",
                 instant=True, as_table=True),
            datasource=PROMETHEUS, unit="percentunit", width=12, sort_by="Value"),
        table_panel(
            "Erring links", f"The {TOP} links with the highest error rate now.",
            prom(f"topk({TOP}, rate(fabricops_link_errors_total{{{LINKS}}}{RATE}) > 0)",
                 instant=True, as_table=True),
            datasource=PROMETHEUS, width=12, sort_by="Value"),
    ]


def _switches() -> list[PanelBuilder]:
    pauses = ("sum by (device) (rate(fabricops_switch_pfc_pauses_total"
              "{{{0}, direction=\"{1}\"}}{2}))")
    return [
        timeseries_panel(
            "PFC pauses received", "Pause frames per second the switch's ports received: "
            "something downstream cannot keep up. Follow the pauses to their origin.",
            prom(pauses.format(SWITCHES, "rx", RATE), "{{device}}")),
        timeseries_panel(
            "PFC pauses sent", "Pause frames per second the switch's ports sent: its own "
            "queues passed Xoff. A switch that only sends is congested; a NIC that pauses "
            "forever is a pause storm.",
            prom(pauses.format(SWITCHES, "tx", RATE), "{{device}}")),
        timeseries_panel(
            "ECN-marked packets", "Packets per second marked Congestion Experienced.",
            prom(f"sum by (device) (rate(fabricops_switch_ecn_marked_packets_total"
                 f"{{{SWITCHES}}}{RATE}))", "{{device}}"),
            unit="pps"),
        timeseries_panel(
            "Discards", "Input and output discards per second. On a lossless RoCE class "
            "these should be zero; steady discards mean PFC is off or misconfigured.",
            prom(f"sum by (device) (rate(fabricops_switch_discards_total{{{SWITCHES}}}{RATE}))",
                 "{{device}}"),
            unit="pps", steps=(("green", None), ("red", 1))),
    ]
