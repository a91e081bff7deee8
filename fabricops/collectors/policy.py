"""Collectors obey the pipeline: sampling policies from ``control.v1`` reach them here."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter
from pydantic import ValidationError

from fabricops.core.bus import DEFAULT_PREFIX, Bus, Message, Topic, topic_name
from fabricops.core.consumer import GroupConsumer
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.liveness import Liveness
from fabricops.core.records import SamplingPolicy

log = logging.getLogger(__name__)


class FollowsPolicy(Protocol):
    def apply_policy(self, policy: SamplingPolicy) -> None: ...


class PolicyListener:
    """Consumes ``control.v1`` and hands every SamplingPolicy to every collector.

    Each listener is its own consumer group (every collector process must see
    every policy). A record that is not a policy is counted and goes to the
    dead-letter topic.
    """

    def __init__(self, bus: Bus, collectors: Sequence[FollowsPolicy], *, group: str,
                 prefix: str = DEFAULT_PREFIX, registry: CollectorRegistry | None = None,
                 liveness: Liveness | None = None):
        self.bus = bus
        self.collectors = list(collectors)
        self.group = group
        self.topic = topic_name(Topic.CONTROL, prefix)
        reg = registry or CollectorRegistry()
        self.applied = Counter("fabricops_policy_applied", "Sampling policies applied",
                               registry=reg)
        self.rejected = Counter("fabricops_policy_rejected", "control.v1 records not understood",
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

