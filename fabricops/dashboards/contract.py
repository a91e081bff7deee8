"""The Prometheus metrics the dashboards may read: the contract with the ``/metrics`` exporter.

``METRICS`` maps each metric name to its label names; a name ending in
``_total`` is a counter, every other one a gauge. A dashboard expression that
names anything else, or groups by a label its metrics do not carry, is a bug
that a test catches before an operator meets an empty panel.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

METRICS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType({
    # Collectors, pipeline, store and alerts (platform health).
    "fabricops_collector_targets": ("protocol",),
    "fabricops_collector_targets_up": ("protocol",),
    "fabricops_collector_frames_total": ("protocol",),
    "fabricops_collector_samples_total": ("protocol",),
    "fabricops_collector_int_reports_total": (),
    "fabricops_pipeline_frames_total": (),
    "fabricops_pipeline_events_total": (),
    "fabricops_pipeline_segments_total": (),
    "fabricops_pipeline_lag_seconds": (),
    "fabricops_store_size_bytes": (),
    "fabricops_store_rows": ("table",),
    "fabricops_compression_ratio": (),
    "fabricops_rca_diagnoses_total": (),
    "fabricops_diagnoses_active": ("fault_type",),
    "fabricops_actions": ("state",),
    "fabricops_alerts_outbox_pending": (),
    "fabricops_alerts_delivered_total": ("receiver",),
    # Fabric aggregates computed from telemetry.
    "fabricops_link_utilization_ratio": ("link",),
    "fabricops_link_errors_total": ("link",),
    "fabricops_link_rx_power_dbm": ("link",),
    "fabricops_switch_pfc_pauses_total": ("device", "direction"),
    "fabricops_switch_ecn_marked_packets_total": ("device",),
    "fabricops_switch_discards_total": ("device",),
    "fabricops_fabric_links": ("state",),
    "fabricops_fabric_series_dropped": (),
})

METRIC_NAMES: Final[frozenset[str]] = frozenset(METRICS)
"""Every metric name a dashboard may use."""

_NAME = re.compile(r"(?<![\w:])fabricops_[A-Za-z0-9_:]*")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_MATCHER = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)\s*\"")


def metric_names_in(expr: str) -> set[str]:
    """The ``fabricops_*`` names a PromQL expression reads (contract or not)."""
    return set(_NAME.findall(expr))


def label_names_in(expr: str) -> set[str]:
    """Label names a PromQL expression matches on or groups by."""
    grouped = {name.strip() for group in _GROUPING.findall(expr)
               for name in group.split(",") if name.strip()}
    return grouped | set(_MATCHER.findall(expr))
