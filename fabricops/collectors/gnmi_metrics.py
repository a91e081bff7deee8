"""Prometheus metrics of the gNMI collector, labelled by device."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from fabricops.core.frame import Frame

LAG_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class GnmiMetrics:
    """Everything that moves in the collector gets a series here.

    ``errors`` kinds: ``unreachable`` (no connection), ``timeout`` (no first answer
    or a silent stream), ``stream`` (dropped), ``auth``, ``rejected`` (the target
    refused the subscription), ``config`` (unreadable TLS file), ``internal``,
    ``target_error``, ``unmapped_path``, ``bad_value``, ``no_timestamp``, ``bad_timestamp``,
    ``bad_notification`` (per update or notification, skipped), ``sink``.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.up = Gauge("fabricops_gnmi_target_up",
                        "1 while the target's subscription is answering", ["device"],
                        registry=registry)
        self.updates = Counter("fabricops_gnmi_updates", "Leaf updates received", ["device"],
                               registry=registry)
        self.samples = Counter("fabricops_gnmi_samples", "Samples published in frames",
                               ["device"], registry=registry)
        self.frames = Counter("fabricops_gnmi_frames", "Frames published", ["device"],
                              registry=registry)
        self.errors = Counter("fabricops_gnmi_errors", "Failures and skipped input, by kind",
                              ["device", "kind"], registry=registry)
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

    def observe_frame(self, device: str, frame: Frame, lag_s: float) -> None:
        """Count a published frame of ``device``, ``lag_s`` after its notification arrived."""
        self.frames.labels(device).inc()
        self.samples.labels(device).inc(frame.n_samples)
        self.last_sample.labels(device).set(frame.ts_ns / 1e9)
        self.publish_lag.observe(lag_s)
