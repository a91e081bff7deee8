"""Collectors obey the pipeline: sampling policies from ``control.v2`` reach them here.

``PolicyListener`` hands every policy to every collector. Intervals down to
100 ms are honoured by the gNMI subscriber (a SAMPLE subscription at that
interval; the device decides how often it really has a new value) and by
``FrameSampler``, the collector of a source that pushes every frame it makes
(a twin's board, a streaming host agent). A collector that cannot poll that
fast has a floor in ``INTERVAL_FLOORS_S``, and the listener raises what it is
asked to that floor (``IntervalFloor``): an SNMP walk of a whole switch costs
tens of milliseconds, stamps the poll's wall-clock time and reads counters a
device may refresh only every second or so, so SNMP is held to
``SNMP_MIN_INTERVAL_S``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricops.collectors.snmp import SnmpPoller
from fabricops.core.bus import DEFAULT_PREFIX, Bus, Message, Topic, topic_name
from fabricops.core.consumer import GroupConsumer
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.frame import Frame
from fabricops.core.liveness import Liveness
from fabricops.core.records import SamplingPolicy
from fabricops.core.registry import shared_counter
from fabricops.core.sinks import FrameSink

log = logging.getLogger(__name__)
SNMP_MIN_INTERVAL_S = 1.0


class FollowsPolicy(Protocol):
    def apply_policy(self, policy: SamplingPolicy) -> None: ...


#: Collectors that cannot sample as fast as a policy may ask: their shortest interval, s.
INTERVAL_FLOORS_S: dict[type, float] = {SnmpPoller: SNMP_MIN_INTERVAL_S}


class PolicyListener:
    """Consumes ``control.v2`` and hands every SamplingPolicy to every collector.

    Each listener is its own consumer group (every collector process must see
    every policy). A record that is not a policy is counted and goes to the
    dead-letter topic. A collector whose type has a floor in ``floors_s`` gets
    its policies through an ``IntervalFloor``.
    """

    def __init__(self, bus: Bus, collectors: Sequence[FollowsPolicy], *, group: str,
                 prefix: str = DEFAULT_PREFIX, registry: CollectorRegistry | None = None,
                 liveness: Liveness | None = None,
                 floors_s: Mapping[type, float] = INTERVAL_FLOORS_S):
        self.bus = bus
        reg = registry or CollectorRegistry()
        self.collectors: list[FollowsPolicy] = [
            IntervalFloor(c, floors_s[type(c)], name=type(c).__name__, registry=reg)
            if type(c) in floors_s else c for c in collectors]
        self.group = group
        self.topic = topic_name(Topic.CONTROL, prefix)
        self.applied = Counter("fabricops_policy_applied", "Sampling policies applied",
                               registry=reg)
        self.rejected = Counter("fabricops_policy_rejected", "control.v2 records not understood",
                                registry=reg)
        self.dead_letters = DeadLetterBox(bus, group, prefix=prefix, registry=reg)
        self._consumer = GroupConsumer(bus, [self.topic], group, self._apply_all,
                                       name="policy-listener", log=log,
                                       dead_letters=self.dead_letters, liveness=liveness,
                                       registry=reg)

    def start(self) -> None:
        """Join the group (BusError if the bus cannot be reached now) and start listening."""
        self._consumer.start(self.bus.subscribe([self.topic], self.group))

    def stop(self) -> None:
        self._consumer.stop(timeout_s=5)

    def _apply_all(self, messages: list[Message]) -> None:
        for msg in messages:
            self._apply(msg)

    def _apply(self, msg: Message) -> None:
        try:
            policy = SamplingPolicy.decode(msg.value)
        except ValidationError as exc:
            self.rejected.inc()
            self.dead_letters.put(msg, "undecodable", f"not a sampling policy: {exc}")
            return
        for collector in self.collectors:
            collector.apply_policy(policy)
        self.applied.inc()


class IntervalFloor:
    """Passes policies to ``collector``, raising any interval below ``min_interval_s`` to it.

    Each raised policy is counted in ``fabricops_policy_floored{collector=name}``.
    """

    def __init__(self, collector: FollowsPolicy, min_interval_s: float, *, name: str,
                 registry: CollectorRegistry | None = None) -> None:
        if min_interval_s <= 0:
            raise ValueError(f"{name}: min_interval_s must be positive, got {min_interval_s}")
        self.collector = collector
        self.min_interval_s = min_interval_s
        counter = shared_counter(registry or CollectorRegistry(), "fabricops_policy_floored",
                                 "Policies asking a collector for less than its floor",
                                 ["collector"])
        self._floored = counter.labels(name)

    def apply_policy(self, policy: SamplingPolicy) -> None:
        if policy.interval_s < self.min_interval_s:
            self._floored.inc()
            policy = policy.model_copy(update={
                "interval_s": self.min_interval_s,
                "reason": f"{policy.reason} (asked {policy.interval_s:g} s, floor "
                          f"{self.min_interval_s:g} s)"})
        self.collector.apply_policy(policy)


class FrameSamplerConfig(BaseModel):
    """The interval a ``FrameSampler`` keeps for a device no policy names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    interval_s: float = Field(default=1.0, gt=0, le=3600, description="Unless a policy says")


class FrameSampler:
    """The collector of a source that pushes every frame it makes (device time throughout).

    ``offer(frames)`` forwards to ``sink`` each frame that is due under the
    interval in force for its device, and skips the rest. A frame is due when
    it is the device's first, or falls in a later multiple of the interval
    (counted from the epoch, so devices at one interval are sampled at the
    same instants) than the last frame forwarded: a faster policy takes effect
    at the next frame, a slower one at the next multiple. The interval in force
    is the newest policy for the device, else for ``"*"``, unexpired at the
    frame's own timestamp; else ``config.interval_s``. Thread-safe.
    """

    def __init__(self, config: FrameSamplerConfig, sink: FrameSink,
                 registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.sink = sink
        reg = registry or CollectorRegistry()
        self.frames = Counter("fabricops_sampler_frames", "Frames offered to the sampler",
                              ["outcome"], registry=reg)
        self.applied = Counter("fabricops_sampler_policies", "Sampling policies taken",
                               registry=reg)
        self._policies: dict[str, SamplingPolicy] = {}
        self._last_ns: dict[str, int] = {}
        self._lock = threading.Lock()

    def apply_policy(self, policy: SamplingPolicy) -> None:
        """Follow a sampling policy (``device`` ``"*"`` for all); newer ones win."""
        with self._lock:
            held = self._policies.get(policy.device)
            if held is None or held.ts_ns <= policy.ts_ns:
                self._policies[policy.device] = policy
        self.applied.inc()

    def interval_of(self, device: str, at_ns: int) -> float:
        """The interval in force for ``device`` at device time ``at_ns``, in seconds."""
        with self._lock:
            return self._interval_of(device, at_ns)

    def offer(self, frames: Sequence[Frame]) -> list[Frame]:
        """Forward the frames that are due to the sink; return them."""
        due: list[Frame] = []
        with self._lock:
            for frame in frames:
                step = max(1, round(self._interval_of(frame.device, frame.ts_ns) * 1e9))
                last = self._last_ns.get(frame.device)
                if last is None or frame.ts_ns // step > last // step:
                    self._last_ns[frame.device] = frame.ts_ns
                    due.append(frame)
        self.frames.labels("skipped").inc(len(frames) - len(due))
        if due:
            self.sink.publish_frames(due)
            self.frames.labels("forwarded").inc(len(due))
        return due

    def _interval_of(self, device: str, at_ns: int) -> float:
        for key in (device, "*"):
            p = self._policies.get(key)
            if p is not None and (p.expires_ns is None or p.expires_ns > at_ns):
                return p.interval_s
        return self.config.interval_s
