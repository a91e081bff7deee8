"""Prometheus metrics of the gNMI collector, labelled by device."""

from __future__ import annotations

from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from fabricops.collectors.gnmi_explain import OTHER, LeafOutcome
from fabricops.core.frame import Frame

LAG_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
PATH_LABELS_PER_DEVICE = 50
"""Distinct ``path`` label values of the unmapped counter per device; later paths count
under ``(other paths)`` (``--explain`` keeps more)."""


class _DeviceSeries(NamedTuple):
    """A device's series that move with every notification or frame, looked up once (a
    label lookup costs about four times the count it serves)."""

    updates: Counter
    leaves: Counter
    mapped: Counter
    frames: Counter
    samples: Counter
    last_sample: Gauge


class GnmiMetrics:
    """Everything that moves in the collector gets a series here.

    Every per-device series but ``errors``, ``leaves_unsupported`` and ``leaves_unmapped``
    exists for each configured target from construction (:meth:`prepare`); those three appear at
    their first occurrence. ``errors`` reasons: ``unreachable`` (no connection), ``timeout`` (no
    first answer or a silent stream), ``stream`` (dropped), ``auth``, ``rejected`` (the target
    refused the subscription), ``config`` (unreadable TLS file, certificate not fetched),
    ``internal``, ``target_error``, ``unmapped_path``, ``bad_value``, ``bad_encoding``,
    ``no_timestamp``, ``bad_timestamp``, ``bad_notification`` (per leaf or notification,
    skipped), ``bad_message`` (a message gRPC cannot parse: the subscription is renewed),
    ``sink``, ``unmapped_only`` (the target answers but none of its leaves maps: it is not up).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.up = Gauge("fabricops_gnmi_target_up",
                        "1 while the target's subscription is answering and its leaves map "
                        "to metrics", ["device"], registry=registry)
        self.updates = Counter("fabricops_gnmi_updates", "Updates received", ["device"],
                               registry=registry)
        self.leaves = Counter("fabricops_gnmi_leaves", "Leaf updates received, JSON unpacked",
                              ["device"], registry=registry)
        self.mapped = Counter("fabricops_gnmi_leaves_mapped", "Leaf updates that became samples",
                              ["device"], registry=registry)
        self.unsupported = Counter("fabricops_gnmi_leaves_unsupported",
                                   "Leaf updates the catalogue deliberately has no metric for, "
                                   "by the profile's named gap", ["device", "gap"],
                                   registry=registry)
        self.unmapped = Counter("fabricops_gnmi_leaves_unmapped",
                                "Leaf updates whose path maps to nothing, by normalised path "
                                f"(at most {PATH_LABELS_PER_DEVICE} per device)",
                                ["device", "path"], registry=registry)
        self.gone = Counter("fabricops_gnmi_ports_gone",
                            "Ports a delete removed (published as oper_status notPresent)",
                            ["device"], registry=registry)
        self.synced = Gauge("fabricops_gnmi_synced",
                            "1 once the subscription's initial state is complete "
                            "(sync_response)", ["device"], registry=registry)
        self.samples = Counter("fabricops_gnmi_samples", "Samples published in frames",
                               ["device"], registry=registry)
        self.frames = Counter("fabricops_gnmi_frames", "Frames published", ["device"],
                              registry=registry)
        self.joined = Counter("fabricops_gnmi_notifications_joined",
                              "Notifications joined to an earlier one of the same instant "
                              "(one timestamp) in one frame", ["device"], registry=registry)
        self.repeats = Counter("fabricops_gnmi_samples_repeated",
                               "Samples left out of a joined frame: a later notification of "
                               "the instant gave that entity and metric again", ["device"],
                               registry=registry)
        self.errors = Counter("fabricops_gnmi_errors", "Failures and skipped input, by reason",
                              ["device", "reason"], registry=registry)
        self.reconnects = Counter("fabricops_gnmi_reconnects",
                                  "Subscriptions retried after a failure", ["device"],
                                  registry=registry)
        self.interval = Gauge("fabricops_gnmi_sample_interval_seconds",
                              "Sample interval currently subscribed", ["device"],
                              registry=registry)
        self.last_sample = Gauge("fabricops_gnmi_last_sample_timestamp_seconds",
                                 "Device timestamp of the newest frame published", ["device"],
                                 registry=registry)
        self.publish_lag = Histogram("fabricops_gnmi_publish_lag_seconds",
                                     "From receiving a notification to the sink accepting "
                                     "its frame", buckets=LAG_BUCKETS_S, registry=registry)
        self._paths: dict[str, set[str]] = {}
        self._series: dict[str, _DeviceSeries] = {}

    def _of(self, device: str) -> _DeviceSeries:
        series = self._series.get(device)
        if series is None:
            series = self._series[device] = _DeviceSeries(
                self.updates.labels(device), self.leaves.labels(device),
                self.mapped.labels(device), self.frames.labels(device),
                self.samples.labels(device), self.last_sample.labels(device))
        return series

    def prepare(self, devices: list[str]) -> None:
        """Create the per-device series of every configured target (0 until it answers)."""
        families = (self.up, self.updates, self.leaves, self.mapped, self.gone, self.synced,
                    self.samples, self.frames, self.joined, self.repeats, self.reconnects,
                    self.interval, self.last_sample)
        for device in devices:
            for family in families:
                family.labels(device)

    def observe_leaves(self, device: str, outcome: LeafOutcome, updates: int = 0) -> None:
        """Count one notification's ``updates`` and what its leaves became."""
        series = self._of(device)
        if updates:
            series.updates.inc(updates)
        series.leaves.inc(outcome.leaves)
        if outcome.mapped:
            series.mapped.inc(outcome.mapped)
        for gap, n in outcome.unsupported.items():
            self.unsupported.labels(device, gap).inc(n)
        if outcome.unmapped_paths:
            seen = self._paths.setdefault(device, set())
            for path, n in outcome.unmapped_paths.items():
                if path not in seen and len(seen) >= PATH_LABELS_PER_DEVICE:
                    path = OTHER
                seen.add(path)
                self.unmapped.labels(device, path).inc(n)

    def observe_frame(self, device: str, frame: Frame, lag_s: float) -> None:
        """Count a published frame of ``device``, ``lag_s`` after its notification arrived."""
        series = self._of(device)
        series.frames.inc()
        series.samples.inc(frame.n_samples)
        series.last_sample.set(frame.ts_ns / 1e9)
        self.publish_lag.observe(lag_s)
