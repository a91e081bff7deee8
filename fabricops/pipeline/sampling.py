"""Adaptive sampling: quiet devices slow, implicated devices fast, suspect ones fastest.

``SamplingController.observe(events, now_ns)`` runs after every pipeline batch.
A threshold or anomaly event opens a condition on its (entity, metric) until
its ``cleared`` event; a state change counts as a moment of trouble. A device
is *hot* while any of its conditions is open and for ``calm_s`` after its last
event; so is the device at the far end of an implicated port's link (the
neighbour sees the same trouble from the other side, on its own port).

A port (any entity) is *suspect* while a condition on one of the
``suspect_metrics`` families is open on it, and for ``suspect_calm_s`` after
the last one opened or cleared: the congestion signals that come and go within
a second (ECN marks or CNPs far above their recent rate, PFC pause, drops). A
condition raised at a rate of zero (marking that stopped: the bottleneck
moved, or the traffic did) is trouble but not suspicion. A device with a
suspect port is suspect.

Each device gets the interval of its tier: ``suspect_interval_s`` (100 ms by
default) for at most ``max_suspect_devices`` suspect devices, the earliest
suspected first (the others stay at ``fast_interval_s``); ``fast_interval_s``
when hot; ``slow_interval_s`` once calm. A SamplingPolicy goes out on
``control.v2`` whenever a device's interval changes; its reason names the
suspect ports. Policies are per device because collectors subscribe per
device; ``suspects`` keeps the ports. Time is the telemetry's own (the newest
frame's timestamp), so a simulated fabric running faster than real time works.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabricops.core.bus import DEFAULT_PREFIX, Bus, Topic, record_headers, topic_name
from fabricops.core.catalogue import CATALOGUE, UnknownMetricError
from fabricops.core.entities import PORT_SEP
from fabricops.core.records import Event, EventKind, SamplingPolicy
from fabricops.core.topology import Topology

log = logging.getLogger(__name__)
OPENS = frozenset({EventKind.THRESHOLD, EventKind.ANOMALY})
SUSPECT_METRICS = ("ecn_marked_pkts", "cnp_sent", "pfc_rx_pause", "pfc_tx_pause",
                   "in_discards", "out_discards")
Condition = tuple[str, str]  # (entity, metric) of the event that opened it


class SamplingConfig(BaseModel):
    """Intervals the controller asks for, what makes a port suspect, how long calm lasts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slow_interval_s: float = Field(default=10.0, gt=0, le=3600, description="Calm devices")
    fast_interval_s: float = Field(default=1.0, gt=0, le=3600, description="Hot devices")
    suspect_interval_s: float = Field(default=0.1, gt=0, le=3600,
                                      description="Devices with a suspect port")
    calm_s: float = Field(default=30.0, ge=0, description="Event-free time before slowing")
    suspect_calm_s: float = Field(
        default=10.0, ge=0, description="Time without a suspect event before a port is cleared")
    suspect_metrics: tuple[str, ...] = Field(
        default=SUSPECT_METRICS, description="Metric families whose events make a port suspect")
    max_suspect_devices: int = Field(
        default=64, ge=0, description="Devices sampled at the suspect interval at once")
    neighbours: bool = True
    announce_default: bool = Field(
        default=False, description="At start, ask every device ('*') for the slow interval; "
        "off: the collectors' own intervals are the baseline")
    prefix: str = DEFAULT_PREFIX

    @model_validator(mode="after")
    def _ordered(self) -> SamplingConfig:
        if self.fast_interval_s > self.slow_interval_s:
            raise ValueError("fast_interval_s must not exceed slow_interval_s")
        if self.suspect_interval_s > self.fast_interval_s:
            raise ValueError("suspect_interval_s must not exceed fast_interval_s")
        unknown = [m for m in self.suspect_metrics if m not in CATALOGUE.families]
        if unknown:
            raise ValueError(f"suspect_metrics: no metric family {', '.join(unknown)}")
        return self


class SamplingController:
    """Publishes SamplingPolicy records as devices turn hot or suspect and calm down."""

    def __init__(self, config: SamplingConfig, bus: Bus, topology: Topology | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.bus = bus
        self.topology = topology
        reg = registry or CollectorRegistry()
        self.published = Counter("fabricops_sampling_policies", "Policies published",
                                 ["interval"], registry=reg)
        self.hot_devices = Gauge("fabricops_sampling_hot_devices",
                                 "Devices sampled faster than the slow interval now",
                                 registry=reg)
        self.suspect_devices = Gauge("fabricops_sampling_suspect_devices",
                                     "Devices sampled at the suspect interval now", registry=reg)
        self.suspect_ports = Gauge("fabricops_sampling_suspect_ports",
                                   "Ports (entities) under suspicion now", registry=reg)
        self.over_cap = Gauge("fabricops_sampling_suspects_over_cap",
                              "Suspect devices held at the fast interval by "
                              "max_suspect_devices", registry=reg)
        self._open: dict[str, set[Condition]] = {}  # device -> open conditions
        self._open_suspect: dict[str, dict[Condition, str]] = {}  # ... suspect ones -> port
        self._last_event_ns: dict[str, int] = {}
        self._suspect_seen: dict[str, dict[str, int]] = {}  # device -> port -> last event
        self._suspect_since: dict[str, int] = {}
        self._interval: dict[str, float] = {}  # devices faster than slow -> their interval
        self._suspects: dict[str, frozenset[str]] = {}
        self._fastest: frozenset[str] = frozenset()

    @property
    def hot(self) -> frozenset[str]:
        """Devices sampled faster than the slow interval (hot or suspect)."""
        return frozenset(self._interval)

    @property
    def suspect(self) -> frozenset[str]:
        """Suspect devices sampled at the suspect interval (within the cap)."""
        return self._fastest

    @property
    def suspects(self) -> dict[str, frozenset[str]]:
        """Device -> its suspect ports, as of the last ``observe``."""
        return dict(self._suspects)

    def interval_of(self, device: str) -> float | None:
        """The interval last asked of ``device``; None if never implicated or calm again."""
        return self._interval.get(device)

    def start(self, now_ns: int = 0) -> None:
        """With ``announce_default``, announce the slow interval as every device's default."""
        if self.config.announce_default:
            self._publish([SamplingPolicy(device="*", interval_s=self.config.slow_interval_s,
                                          ts_ns=now_ns, reason="default: calm")])

    def stop(self) -> None:
        """Nothing to release (the controller owns no thread)."""

    def observe(self, events: Sequence[Event], now_ns: int) -> list[SamplingPolicy]:
        """Apply a batch's events, then publish what changed; returns those policies."""
        for event in events:
            self._take(event)
        hot = self._hot_devices(now_ns)
        self._suspects = self._suspect_ports(now_ns)
        self._fastest = fast = frozenset(self._within_cap(now_ns))
        wanted = {d: self.config.suspect_interval_s if d in fast
                  else self.config.fast_interval_s for d in hot | self._suspects.keys()}
        policies = [self._policy(d, i, now_ns) for d, i in sorted(wanted.items())
                    if self._interval.get(d) != i]
        policies += [SamplingPolicy(device=d, interval_s=self.config.slow_interval_s,
                                    ts_ns=now_ns, reason=f"calm for {self.config.calm_s:g} s")
                     for d in sorted(self._interval.keys() - wanted.keys())]
        self._interval = wanted
        self.hot_devices.set(len(wanted))
        self.suspect_devices.set(len(fast))
        self.suspect_ports.set(sum(len(p) for p in self._suspects.values()))
        self.over_cap.set(len(self._suspects) - len(fast))
        self._publish(policies)
        return policies

    def _take(self, event: Event) -> None:
        key = (event.entity, event.metric)
        raises = event.kind in OPENS and event.value > 0 and self._is_suspect(event.metric)
        for device, port in self._implicated(event):
            self._last_event_ns[device] = max(self._last_event_ns.get(device, 0), event.ts_ns)
            conditions = self._open.setdefault(device, set())
            suspect = self._open_suspect.setdefault(device, {})
            if event.kind in OPENS:
                conditions.add(key)
            elif event.kind is EventKind.CLEARED:
                conditions.discard(key)
            ends = event.kind is EventKind.CLEARED and suspect.pop(key, None) is not None
            if raises:
                suspect[key] = port
            if raises or ends:
                seen = self._suspect_seen.setdefault(device, {})
                seen[port] = max(seen.get(port, 0), event.ts_ns)

    def _hot_devices(self, now_ns: int) -> set[str]:
        calm_ns = round(self.config.calm_s * 1e9)
        return {d for d, t in self._last_event_ns.items()
                if self._open.get(d) or now_ns - t < calm_ns}

    def _suspect_ports(self, now_ns: int) -> dict[str, frozenset[str]]:
        """Device -> ports with an open suspect condition or a recent suspect event."""
        calm_ns = round(self.config.suspect_calm_s * 1e9)
        out: dict[str, frozenset[str]] = {}
        for device, seen in list(self._suspect_seen.items()):
            held = set(self._open_suspect.get(device, {}).values())
            recent = {port for port, t in seen.items() if now_ns - t < calm_ns}
            for port in [p for p in seen if p not in recent | held]:
                del seen[port]
            if not seen:
                del self._suspect_seen[device]
            if held | recent:
                out[device] = frozenset(held | recent)
        return out

    def _within_cap(self, now_ns: int) -> set[str]:
        """The suspect devices sampled at the suspect interval: the earliest suspected."""
        for device in list(self._suspect_since):
            if device not in self._suspects:
                del self._suspect_since[device]
        for device in self._suspects:
            self._suspect_since.setdefault(device, now_ns)
        order = sorted(self._suspects, key=lambda d: (self._suspect_since[d], d))
        return set(order[:self.config.max_suspect_devices])

    def _policy(self, device: str, interval_s: float, now_ns: int) -> SamplingPolicy:
        ports = self._suspects.get(device)
        if ports and device in self._fastest:
            reason = f"suspect: {', '.join(sorted(ports))}"
        elif ports:
            reason = f"suspect, over the {self.config.max_suspect_devices}-device cap: " \
                     f"{', '.join(sorted(ports))}"
        else:
            reason = "implicated by events"
        return SamplingPolicy(device=device, interval_s=interval_s, ts_ns=now_ns, reason=reason)

    def _is_suspect(self, metric: str) -> bool:
        try:
            family = CATALOGUE.by_name(metric).family.name
        except UnknownMetricError:
            return False
        return family in self.config.suspect_metrics

    def _implicated(self, event: Event) -> list[tuple[str, str]]:
        """(device, its entity) the event implicates: its own, and the far end of a port."""
        out = [(event.device, event.entity)]
        if self.config.neighbours and self.topology is not None and PORT_SEP in event.entity:
            peer = self.topology.peer_of.get(event.entity)
            if peer is not None:
                out.append((peer.split(PORT_SEP, 1)[0], peer))
        return out

    def _publish(self, policies: Sequence[SamplingPolicy]) -> None:
        if not policies:
            return
        topic = topic_name(Topic.CONTROL, self.config.prefix)
        for policy in policies:
            self.bus.publish(topic, policy.device.encode(), [policy.encode()],
                             record_headers(Topic.CONTROL, "pipeline"))
            self.published.labels(f"{policy.interval_s:g}").inc()
            log.info("sampling %s every %g s (%s)", policy.device, policy.interval_s,
                     policy.reason)
