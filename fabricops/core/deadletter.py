"""Dead letters: records a consumer could not take, set aside with the reason.

A ``DeadLetter`` is the raw record (key, value and headers, as they were) with where it
came from (topic, partition, offset), which consumer group gave up on it, a
short ``reason`` code (``undecodable``, ``out_of_range``, ``handler_error``,
...) and a readable ``detail``. It travels on ``<prefix>deadletter.v2`` as the
protobuf message ``SCHEMA`` names, keyed by the original topic, with the group
as its ``source`` header, so any tool can read it and a fixed consumer can
replay the original bytes. Its JSON view carries key and value in base64.

``DeadLetterBox.put`` publishes one, counts it per (group, reason) and logs it
(one line per reason per interval). Publishing never raises: a bus that cannot
take the dead letter is itself counted and logged, and the loop goes on.
"""

from __future__ import annotations

import logging
import time
from typing import ClassVar

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.bus import DEFAULT_PREFIX, Bus, Message, Topic, record_headers, topic_name
from fabricops.core.logthrottle import ThrottledLog
from fabricops.core.registry import shared_counter
from fabricops.core.wire_records import WireModel

log = logging.getLogger(__name__)


class RecordHeader(BaseModel):
    """One header of a dead letter's record."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_bytes="base64",
                              val_json_bytes="base64")

    key: str
    value: bytes = b""


class DeadLetter(WireModel):
    """One record set aside by a consumer (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_bytes="base64",
                              val_json_bytes="base64")
    SCHEMA: ClassVar[str] = Topic.DEAD_LETTERS.schema

    topic: str
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    group: str = Field(description="Consumer group that set the record aside")
    reason: str = Field(min_length=1, description="Short code, e.g. undecodable")
    detail: str = ""
    ts_ns: int = Field(ge=0, description="When it was set aside, ns since epoch")
    key: bytes = b""
    value: bytes = b""
    headers: tuple[RecordHeader, ...] = ()

    @classmethod
    def of(cls, msg: Message, *, group: str, reason: str, detail: str,
           ts_ns: int | None = None) -> DeadLetter:
        return cls(topic=msg.topic, partition=msg.partition, offset=msg.offset, group=group,
                   reason=reason, detail=detail[:2000],
                   ts_ns=time.time_ns() if ts_ns is None else ts_ns,
                   key=msg.key, value=msg.value,
                   headers=tuple(RecordHeader(key=k, value=v) for k, v in msg.headers))

    def record_headers(self) -> tuple[tuple[str, bytes], ...]:
        """The record's headers as the bus takes them, to publish it again."""
        return tuple((h.key, h.value) for h in self.headers)


class DeadLetterBox:
    """Where one consumer group's failing records go (see the module docstring)."""

    def __init__(self, bus: Bus, group: str, *, prefix: str = DEFAULT_PREFIX,
                 registry: CollectorRegistry | None = None,
                 throttle_s: float = 30.0) -> None:
        self.bus = bus
        self.group = group
        self.topic = topic_name(Topic.DEAD_LETTERS, prefix)
        reg = registry if registry is not None else CollectorRegistry()
        self.m_letters = shared_counter(reg, "fabricops_dead_letters",
                                  "Records a consumer set aside on the dead-letter topic",
                                  ["group", "reason"])
        self.m_lost = shared_counter(reg, "fabricops_dead_letters_unpublished",
                               "Dead letters the bus would not take (logged only)", ["group"])
        self._log = ThrottledLog(log, throttle_s)

    def put(self, msg: Message, reason: str, detail: str) -> None:
        """Set ``msg`` aside; never raises."""
        self.m_letters.labels(self.group, reason).inc()
        self._log.warning(f"{self.group}:{reason}", "%s set aside %s[%d]@%d (%s): %s",
                          self.group, msg.topic, msg.partition, msg.offset, reason, detail)
        letter = DeadLetter.of(msg, group=self.group, reason=reason, detail=detail)
        try:
            self.bus.publish(self.topic, msg.topic.encode(), [letter.encode()],
                             record_headers(Topic.DEAD_LETTERS, self.group))
        except Exception as exc:  # the loop must go on whatever the bus says
            self.m_lost.labels(self.group).inc()
            self._log.error(f"{self.group}:unpublished", "%s: dead letter of %s[%d]@%d not "
                            "published: %s", self.group, msg.topic, msg.partition, msg.offset,
                            exc)

    def count(self, reason: str | None = None) -> float:
        """Dead letters put so far (of ``reason`` if given)."""
        total = 0.0
        for metric in self.m_letters.collect():
            for s in metric.samples:
                if (s.name.endswith("_total") and s.labels["group"] == self.group
                        and reason in (None, s.labels["reason"])):
                    total += s.value
        return total

