"""Collector health: is fabricops itself seeing the fabric, keeping up, and storing it."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard

from fabricops.dashboards.panels import (
    PanelBuilder,
    new_dashboard,
    prom,
    stat_panel,
    timeseries_panel,
)

UID = "fabricops-collector-health"
FILE_NAME = "collector-health.json"
RATE = "[$__rate_interval]"
ANY_IS_BAD = (("green", None), ("red", 1))


def build() -> dashboard.Dashboard:
    """The collector health dashboard (uid ``fabricops-collector-health``)."""
    return new_dashboard(
        UID, "Collector health",
        "Targets answering per protocol, what the collectors publish, how far the pipeline "
        "lags, how large the store grows and how well it compresses, and alert delivery.",
        [("Collectors", _collectors()), ("Pipeline and store", _pipeline()),
         ("Alerts", _alerts())])


def _collectors() -> list[PanelBuilder]:
    return [
        stat_panel("Targets not answering", "Configured targets (all protocols) that do not "
                   "answer: their devices are not being seen.",
                   "sum(fabricops_collector_targets) - sum(fabricops_collector_targets_up)",
                   steps=ANY_IS_BAD, width=6),
        stat_panel("Targets answering", "Share of configured targets that answer, by "
                   "protocol.",
                   "sum by (protocol) (fabricops_collector_targets_up) / sum by (protocol) "
                   "(fabricops_collector_targets)", legend="{{protocol}}",
                   unit="percentunit", width=18,
                   steps=(("red", None), ("orange", 0.9), ("green", 1))),
        timeseries_panel(
            "Targets up vs configured", "Per protocol: targets answering against targets "
            "configured.",
            prom("sum by (protocol) (fabricops_collector_targets_up)", "{{protocol}} up"),
            prom("sum by (protocol) (fabricops_collector_targets)", "{{protocol}} configured",
                 ref_id="B")),
        timeseries_panel(
            "INT reports", "INT telemetry reports received per second.",
            prom(f"sum(rate(fabricops_collector_int_reports_total{RATE}))", "reports"),
            unit="cps"),
        timeseries_panel(
            "Frames per second by protocol", "Frames (one device, one instant) published.",
            prom(f"sum by (protocol) (rate(fabricops_collector_frames_total{RATE}))",
                 "{{protocol}}"), unit="cps", stacked=True),
        timeseries_panel(
            "Samples per second by protocol", "Samples (entity, metric, value) published.",
            prom(f"sum by (protocol) (rate(fabricops_collector_samples_total{RATE}))",
                 "{{protocol}}"), unit="cps", stacked=True),
    ]


def _pipeline() -> list[PanelBuilder]:
    return [
        stat_panel("Pipeline lag", "Wall clock minus the newest frame time the pipeline "
                   "accepted (worst worker).",
                   "max(fabricops_pipeline_lag_seconds)", unit="s",
                   steps=(("green", None), ("orange", 10), ("red", 60)), graph=True, width=6),
        stat_panel("Store size", "Size of the database.",
                   "sum(fabricops_store_size_bytes)", unit="bytes",
                   graph=True, width=6),
        stat_panel("Compression ratio", "Raw bytes (16 per point) over stored segment bytes.",
                   "avg(fabricops_compression_ratio)", unit="x",
                   steps=(("orange", None), ("green", 4)), width=6),
        stat_panel("Fabric series over the limit", "Link and switch series the exporter "
                   "left out to bound cardinality (the least utilized links go first).",
                   "sum(fabricops_fabric_series_dropped)",
                   steps=(("green", None), ("orange", 1)), width=6),
        timeseries_panel(
            "Pipeline throughput", "Frames accepted, key events raised and keyframe segments "
            "written, per second.",
            prom(f"sum(rate(fabricops_pipeline_frames_total{RATE}))", "frames"),
            prom(f"sum(rate(fabricops_pipeline_events_total{RATE}))", "events", ref_id="B"),
            prom(f"sum(rate(fabricops_pipeline_segments_total{RATE}))", "segments",
                 ref_id="C"), unit="cps"),
        timeseries_panel(
            "Rows by table", "Rows in each store table.",
            prom("sum by (table) (fabricops_store_rows)", "{{table}}")),
    ]


def _alerts() -> list[PanelBuilder]:
    return [
        stat_panel("Alert outbox pending", "Webhook notices not yet delivered; a growing "
                   "number means a receiver is down.",
                   "sum(fabricops_alerts_outbox_pending)",
                   steps=(("green", None), ("orange", 10), ("red", 100)), graph=True, width=6),
        timeseries_panel(
            "Alerts delivered by receiver", "Notices per second a receiver accepted (2xx).",
            prom(f"sum by (receiver) (rate(fabricops_alerts_delivered_total{RATE}))",
                 "{{receiver}}"), unit="cps", width=18),
    ]
