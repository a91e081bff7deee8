"""The message bus: one small interface, two implementations (memory, Kafka).

Semantics both implementations keep:
- ``publish`` takes a batch of values under one key; values with the same key
  stay in order (one key maps to one partition).
- Consumers in the same group share the partitions of a topic; each record
  goes to one member of each group.
- Delivery is at-least-once: a consumer ``commit``s after its work is durable;
  records polled but not committed are delivered again after a restart or a
  rebalance.
Topic names carry the schema version (``telemetry.v1``) behind a configurable
prefix (default ``fabricops.``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class Topic(StrEnum):
    """Logical topics; the wire name is ``prefix + value``."""

    TELEMETRY = "telemetry.v1"  # Frames, key = device
    INT = "int.v1"  # IntReports, key = sink switch
    EVENTS = "events.v1"
    DIAGNOSES = "diagnoses.v1"
    ACTIONS = "actions.v1"
    CONTROL = "control.v1"  # SamplingPolicy
    DEAD_LETTERS = "deadletter.v1"  # DeadLetter: records a consumer could not take


DEFAULT_PREFIX = "fabricops."


def topic_name(topic: Topic, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}{topic.value}"


class BusError(RuntimeError):
    """The bus cannot do what was asked; the message names the topic or broker."""


@dataclass(frozen=True)
class Message:
    """One record as a consumer sees it."""

    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    timestamp_ms: int


class Consumer(Protocol):
    """A member of a consumer group; one thread polls it (one thread per member)."""

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Message]:
        """Records from the owned partitions; may wait longer while the member joins."""

    def commit(self) -> None:
        """Mark everything polled so far as done (call after the work is durable)."""

    def assignment(self) -> set[tuple[str, int]]:
        """The (topic, partition) pairs this member owns now."""

    def close(self) -> None: ...


class Bus(Protocol):
    """Publish batches, subscribe in consumer groups."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def publish(self, topic: str, key: bytes, values: Sequence[bytes]) -> None:
        """Queue values for ``topic`` under ``key``; never blocks for long (bounded buffer)."""

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until queued values are acknowledged; False if the timeout passed first."""

    def subscribe(self, topics: Sequence[str], group: str) -> Consumer: ...
