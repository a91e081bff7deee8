"""The message bus: one small interface, two implementations (memory, Kafka).

Semantics both implementations keep:
- ``publish`` takes a batch of values under one key; values with the same key
  stay in order (one key maps to one partition).
- Consumers in the same group share the partitions of a topic; each record
  goes to one member of each group.
- Delivery is at-least-once: a consumer ``commit``s after its work is durable;
  records polled but not committed are delivered again after a restart or a
  rebalance.
Topic names carry the schema version (``telemetry.v2``) behind a configurable
prefix (default ``fabricops.``). Every record of a topic is one Protocol Buffers
message of the topic's ``schema`` (the ``.proto`` files under
``fabricops/schemas/``, see :mod:`fabricops.core.wire_schema`) and carries the
headers ``record_headers`` makes: ``content-type``, ``schema`` (the message's
full name), ``schema-version`` and ``source`` (the component or telemetry
source that produced it). Decoders read the value alone, so a record without
headers is still taken.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Protocol

Headers = tuple[tuple[str, bytes], ...]
"""Record headers: (name, value) pairs, in order; a name may repeat (as in Kafka)."""

CONTENT_TYPE: Final = "application/x-protobuf"


class Topic(StrEnum):
    """Logical topics; the wire name is ``prefix + value``."""

    TELEMETRY = "telemetry.v2"  # Frame, key = device
    INT = "int.v2"  # IntBatch, key = sink switch node id
    EVENTS = "events.v2"  # Event, key = entity
    DIAGNOSES = "diagnoses.v2"  # Diagnosis, key = root entity
    ACTIONS = "actions.v2"  # Action, key = action id
    CONTROL = "control.v2"  # SamplingPolicy, key = device ("*": every device)
    DEAD_LETTERS = "deadletter.v2"  # DeadLetter, key = the record's original topic

    @property
    def schema(self) -> str:
        """Full name of the protobuf message every record of the topic is."""
        return TOPIC_SCHEMAS[self]


TOPIC_SCHEMAS: Final[dict[Topic, str]] = {
    Topic.TELEMETRY: "fabricops.telemetry.v2.Frame",
    Topic.INT: "fabricops.intreport.v2.IntBatch",
    Topic.EVENTS: "fabricops.events.v2.Event",
    Topic.DIAGNOSES: "fabricops.diagnoses.v2.Diagnosis",
    Topic.ACTIONS: "fabricops.actions.v2.Action",
    Topic.CONTROL: "fabricops.control.v2.SamplingPolicy",
    Topic.DEAD_LETTERS: "fabricops.deadletter.v2.DeadLetter",
}

DEFAULT_PREFIX = "fabricops."


def record_headers(topic: Topic, source: str) -> Headers:
    """The headers of a record of ``topic`` produced by ``source`` (e.g. ``snmp``, ``rca``).

    ``schema-version`` is the major version of the schema's package (``2`` for
    ``fabricops.telemetry.v2``), the version in the topic name.
    """
    return (*_schema_headers(topic), ("source", source.encode()))


@functools.cache
def _schema_headers(topic: Topic) -> Headers:
    schema = topic.schema
    version = schema.rsplit(".", 2)[-2].removeprefix("v")
    return (("content-type", CONTENT_TYPE.encode()), ("schema", schema.encode()),
            ("schema-version", version.encode()))


def header(headers: Headers, name: str) -> bytes | None:
    """The value of the last header called ``name``, or None."""
    return next((v for k, v in reversed(headers) if k == name), None)


def topic_name(topic: Topic, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{prefix}{topic.value}"


class BusError(RuntimeError):
    """The bus cannot do what was asked; the message names the topic or broker."""


@dataclass(frozen=True)
class Message:
    """One record as a consumer sees it (``headers`` empty if it was published without)."""

    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    timestamp_ms: int
    headers: Headers = ()


class Consumer(Protocol):
    """A member of a consumer group; one thread polls it (one thread per member)."""

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Message]:
        """Records from the owned partitions; may wait longer while the member joins."""

    def commit(self, hold: Mapping[tuple[str, int], int] | None = None) -> None:
        """Mark everything polled so far as done (call after the work is durable), but
        for each partition in ``hold`` only the records before its offset: the ones
        from it on are delivered again after a restart or a rebalance."""

    def assignment(self) -> set[tuple[str, int]]:
        """The (topic, partition) pairs this member owns now."""

    def joining_s(self) -> float:
        """Seconds this member has waited for its group to finish a rebalance; 0 while
        the group is settled (whether or not the member owns a partition)."""

    def caught_up(self) -> set[tuple[str, int]]:
        """The owned partitions this member has read to their end, as far as its last
        poll knew (a partition whose end it has not learnt yet is not among them)."""

    def close(self) -> None: ...


class Bus(Protocol):
    """Publish batches, subscribe in consumer groups."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def publish(self, topic: str, key: bytes, values: Sequence[bytes],
                headers: Headers = ()) -> None:
        """Queue values for ``topic`` under ``key``, each with ``headers``; never blocks for
        long (bounded buffer)."""

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until queued values are acknowledged; False if the timeout passed first."""

    def subscribe(self, topics: Sequence[str], group: str) -> Consumer: ...
