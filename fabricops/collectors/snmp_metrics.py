"""Prometheus metrics of the SNMP poller."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class SnmpMetrics:
    """Series of the SNMP poller: target health, polls, samples, errors, lag.

    ``target_up{device}`` exists for every configured target from construction
    (:meth:`prepare`); how many answer is ``sum(fabricops_snmp_target_up)`` (and
    ``fabricops_collector_targets_up{protocol="snmp"}``). ``errors`` reasons: ``poll`` (a poll
    failed other than by timeout), ``malformed_row`` (a row skipped), ``publish`` (the sink
    refused a frame), ``malformed_datagram`` (not an SNMPv2c response), ``foreign_datagram`` (a
    request-id in flight answered from another address or port: ignored), ``unmatched_datagram``
    (no such request in flight: a late answer, or junk). A healthy device adds to none of them.

    ``rows_skipped`` counts rows the decoder does not use, by ``reason`` (an index
    that is not a plain ifIndex, a priority outside 0..7, a port not described, a
    32-bit counter row where the 64-bit one exists, sensors it cannot place): no
    error, and no cause to describe the device again. ``describes`` counts device
    descriptions by ``reason``: ``first``, ``restart`` (sysUpTime went back),
    ``table_change`` (ifTableLastChange moved), ``stale`` (describe_every_polls).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        r, p = registry, "fabricops_snmp_"
        self.target_up = Gauge(f"{p}target_up", "1 if the target answers", ["device"],
                               registry=r)
        self.polls = Counter(f"{p}polls", "Polls by result", ["result"], registry=r)
        self.samples = Counter(f"{p}samples", "Samples published", registry=r)
        self.varbinds = Counter(f"{p}varbinds", "Variable bindings received", registry=r)
        self.varbinds_requested = Counter(
            f"{p}varbinds_requested", "Most variable bindings the requests asked for", registry=r)
        self.requests = Counter(f"{p}requests", "Requests answered or refused", registry=r)
        self.skipped = Counter(f"{p}rows_skipped", "Rows not used, by reason", ["reason"],
                               registry=r)
        self.describes = Counter(f"{p}describes", "Device descriptions, by reason", ["reason"],
                                 registry=r)
        self.timeouts = Counter(f"{p}timeouts", "Polls that timed out", registry=r)
        self.errors = Counter(f"{p}errors", "Errors by reason", ["reason"], registry=r)
        self.duration = Histogram(f"{p}poll_duration_seconds", "Walk duration", registry=r)
        self.lag = Histogram(f"{p}publish_lag_seconds", "Collection to publish",
                             buckets=(.001, .005, .01, .05, .1, .5, 1, 5), registry=r)
        self.wraps = Counter(f"{p}wraps", "Counter32 wraps carried", registry=r)
        self.resets = Counter(f"{p}device_resets", "Counters that went back (a device restart)",
                              registry=r)
        for reason in ("poll", "malformed_row", "publish", "malformed_datagram",
                       "foreign_datagram", "unmatched_datagram"):
            self.errors.labels(reason)
        for result in ("ok", "timeout", "error"):
            self.polls.labels(result)

    def prepare(self, devices: list[str]) -> None:
        """Create the per-device series of every configured target (0 until polled)."""
        for device in devices:
            self.target_up.labels(device)


__all__ = ["SnmpMetrics"]
