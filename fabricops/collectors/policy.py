"""Collectors obey the pipeline: sampling policies from ``control.v1`` reach them here."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter
from pydantic import ValidationError

from fabricops.core.bus import DEFAULT_PREFIX, Bus, Consumer, Message, Topic, topic_name
from fabricops.core.busio import consume_until
from fabricops.core.records import SamplingPolicy


class FollowsPolicy(Protocol):
    def apply_policy(self, policy: SamplingPolicy) -> None: ...


class PolicyListener:
    """Consumes ``control.v1`` and hands every SamplingPolicy to every collector.

    Each listener is its own consumer group (every collector process must see
    every policy). A record that is not a policy is counted and skipped.
    """

    def __init__(self, bus: Bus, collectors: Sequence[FollowsPolicy], *, group: str,
                 prefix: str = DEFAULT_PREFIX, registry: CollectorRegistry | None = None):
        self.bus = bus
        self.collectors = list(collectors)
        self.group = group
        self.topic = topic_name(Topic.CONTROL, prefix)
        reg = registry or CollectorRegistry()
        self.applied = Counter("fabricops_policy_applied", "Sampling policies applied",
                               registry=reg)
        self.rejected = Counter("fabricops_policy_rejected", "control.v1 records not understood",
                                registry=reg)
        self.bus_errors = Counter("fabricops_policy_bus_errors",
                                  "Polls that failed because the bus was unreachable",
                                  registry=reg)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Join the group (BusError if the bus cannot be reached now) and start listening."""
        consumer = self.bus.subscribe([self.topic], self.group)
        self._thread = threading.Thread(target=self._run, args=(consumer,),
                                        name="policy-listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self, consumer: Consumer | None) -> None:
        """Poll until stopped; a bus that goes away is counted, waited out and rejoined."""
        consume_until(self._stop, self.bus, [self.topic], self.group, self._apply_all,
                      consumer=consumer, on_bus_error=lambda *_: self.bus_errors.inc())

    def _apply_all(self, messages: list[Message]) -> None:
        for msg in messages:
            self._apply(msg.value)

    def _apply(self, value: bytes) -> None:
        try:
            policy = SamplingPolicy.decode(value)
        except ValidationError:
            self.rejected.inc()
            return
        for collector in self.collectors:
            collector.apply_policy(policy)
        self.applied.inc()

