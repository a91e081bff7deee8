"""Adaptive sampling: quiet devices slow, devices implicated by events fast.

``SamplingController.observe(events, now_ns)`` runs after every pipeline batch.
A threshold or anomaly event opens a condition on its (entity, metric) until
its ``cleared`` event; a state change counts as a moment of trouble. A device
is hot while any of its conditions is open and for ``calm_s`` after its last
event; so is the device at the far end of an implicated port's link (the
neighbour sees the same trouble from the other side). A device that turns hot
gets a fast SamplingPolicy on ``control.v1``; one that has been calm for
``calm_s`` gets the slow interval back. Time is the telemetry's own (the newest
frame's timestamp), so a simulated fabric running faster than real time works.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabricops.core.bus import DEFAULT_PREFIX, Bus, Topic, topic_name
from fabricops.core.entities import PORT_SEP
from fabricops.core.records import Event, EventKind, SamplingPolicy
from fabricops.core.topology import Topology

log = logging.getLogger(__name__)
OPENS = frozenset({EventKind.THRESHOLD, EventKind.ANOMALY})


class SamplingConfig(BaseModel):
    """Intervals the controller asks for, and how long calm must last."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slow_interval_s: float = Field(default=10.0, gt=0, le=3600)
    fast_interval_s: float = Field(default=1.0, gt=0, le=3600)
    calm_s: float = Field(default=30.0, ge=0, description="Event-free time before slowing")
    neighbours: bool = True
    announce_default: bool = Field(
        default=False, description="At start, ask every device ('*') for the slow interval; "
        "off: the collectors' own intervals are the baseline")
    prefix: str = DEFAULT_PREFIX

    @model_validator(mode="after")
    def _fast_is_faster(self) -> SamplingConfig:
        if self.fast_interval_s > self.slow_interval_s:
            raise ValueError("fast_interval_s must not exceed slow_interval_s")
        return self


class SamplingController:
    """Publishes SamplingPolicy records as devices turn hot and calm down."""

    def __init__(self, config: SamplingConfig, bus: Bus, topology: Topology | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.bus = bus
        self.topology = topology
        reg = registry or CollectorRegistry()
        self.published = Counter("fabricops_sampling_policies", "Policies published",
                                 ["interval"], registry=reg)
        self.hot_devices = Gauge("fabricops_sampling_hot_devices",
                                 "Devices sampled fast now", registry=reg)
        self._open: dict[str, set[tuple[str, str]]] = {}  # device -> open conditions
        self._last_event_ns: dict[str, int] = {}
        self._hot: set[str] = set()

    @property
    def hot(self) -> frozenset[str]:
        return frozenset(self._hot)

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
            for device in self._implicated(event):
                self._last_event_ns[device] = max(self._last_event_ns.get(device, 0),
                                                  event.ts_ns)
                conditions = self._open.setdefault(device, set())
                if event.kind in OPENS:
                    conditions.add((event.entity, event.metric))
                elif event.kind is EventKind.CLEARED:
                    conditions.discard((event.entity, event.metric))
        calm_ns = round(self.config.calm_s * 1e9)
        hot = {d for d, t in self._last_event_ns.items()
               if self._open.get(d) or now_ns - t < calm_ns}
        policies = [SamplingPolicy(device=d, interval_s=self.config.fast_interval_s,
                                   ts_ns=now_ns, reason="implicated by events")
                    for d in sorted(hot - self._hot)]
        policies += [SamplingPolicy(device=d, interval_s=self.config.slow_interval_s,
                                    ts_ns=now_ns, reason=f"calm for {self.config.calm_s:g} s")
                     for d in sorted(self._hot - hot)]
        self._hot = hot
        self.hot_devices.set(len(hot))
        self._publish(policies)
        return policies

    def _implicated(self, event: Event) -> list[str]:
        devices = [event.device]
        if self.config.neighbours and self.topology is not None and PORT_SEP in event.entity:
            peer = self.topology.peer_of.get(event.entity)
            if peer is not None:
                devices.append(peer.split(PORT_SEP, 1)[0])
        return devices

    def _publish(self, policies: Sequence[SamplingPolicy]) -> None:
        if not policies:
            return
        topic = topic_name(Topic.CONTROL, self.config.prefix)
        for policy in policies:
            self.bus.publish(topic, policy.device.encode(), [policy.encode()])
            self.published.labels(f"{policy.interval_s:g}").inc()
            log.info("sampling %s every %g s (%s)", policy.device, policy.interval_s,
                     policy.reason)
