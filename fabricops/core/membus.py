"""MemoryBus: an in-process bus with Kafka's semantics, for the embedded default and tests.

- A topic (created on first use) has ``partitions`` partitions; a key maps to a
  partition by CRC-32 of the key, stable across processes and runs.
- Each partition is an ordered log; offsets start at 0 and never repeat.
- Consumers subscribe in groups. The partitions of each topic are dealt
  round-robin among the group's members subscribed to it, again whenever a
  member joins or leaves. A member that has not polled for ``member_timeout_s``
  is removed (as a crashed Kafka consumer is) and rejoins on its next poll.
- A member starts a newly assigned partition at the group's committed offset
  (the start of the log if none): records polled but not committed are
  delivered again after a close, a crash or a rebalance (at-least-once).
- Retention: at most ``retention_records`` records and ``retention_bytes`` of
  keys and values are kept across all topics. Past either bound the oldest
  records are dropped and counted; a member behind the start of a log resumes
  at its first retained record.
Every method is thread-safe; ``poll`` waits on a condition, not in a sleep loop.
"""

from __future__ import annotations

import time
import zlib
from collections import deque
from collections.abc import Mapping, Sequence
from threading import Condition

from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.bus import BusError, Headers, Message

TopicPartition = tuple[str, int]


class MemoryBusConfig(BaseModel):
    """Partitioning and retention of the in-process bus."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    partitions: int = Field(default=8, ge=1, le=4096, description="Partitions of each topic")
    retention_records: int = Field(
        default=200_000, ge=1, description="Records kept across all topics; oldest dropped past it"
    )
    retention_bytes: int = Field(
        default=512 * 2**20, ge=1, description="Key+value bytes kept; oldest dropped past it"
    )
    member_timeout_s: float = Field(
        default=30.0, gt=0, description="A member that has not polled for this long leaves"
    )


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition of ``key`` among ``partitions``: CRC-32, the same in every process."""
    return zlib.crc32(key) % partitions


class _Log:
    """One partition: records ``start .. end-1``, oldest first."""

    def __init__(self) -> None:
        self.start = 0
        self._records: list[Message] = []
        self._head = 0  # index in _records of offset ``start``

    @property
    def end(self) -> int:
        return self.start + len(self._records) - self._head

    def append(self, record: Message) -> None:
        self._records.append(record)

    def drop_oldest(self) -> Message:
        record = self._records[self._head]
        self._head += 1
        self.start += 1
        if self._head > 1024 and self._head * 2 > len(self._records):
            del self._records[: self._head]
            self._head = 0
        return record

    def read(self, offset: int, limit: int) -> list[Message]:
        i = self._head + max(offset, self.start) - self.start
        return self._records[i : i + limit]


class _Group:
    def __init__(self) -> None:
        self.members: list[MemoryConsumer] = []
        self.committed: dict[TopicPartition, int] = {}


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.published = Counter("fabricops_membus_published_records",
                                 "Records appended to a topic", ["topic"], registry=registry)
        self.dropped = Counter("fabricops_membus_dropped_records",
                               "Records dropped past the retention bounds", ["topic"],
                               registry=registry)
        self.delivered = Counter("fabricops_membus_delivered_records",
                                 "Records returned by poll", ["topic", "group"],
                                 registry=registry)
        self.rebalances = Counter("fabricops_membus_rebalances",
                                  "Partition reassignments of a group", ["group"],
                                  registry=registry)
        self.retained_records = Gauge("fabricops_membus_retained_records",
                                      "Records held across all topics", registry=registry)
        self.retained_bytes = Gauge("fabricops_membus_retained_bytes",
                                    "Key+value bytes held across all topics", registry=registry)
        self._published_to: dict[str, Counter] = {}

    def published_to(self, topic: str) -> Counter:
        """``published`` of ``topic``, its child kept: the twin publishes each device's
        frame by itself, and a label lookup costs 4x the count."""
        child = self._published_to.get(topic)
        if child is None:
            child = self._published_to[topic] = self.published.labels(topic)
        return child


class MemoryBus:
    """The in-process Bus (see the module docstring for its semantics).

    Metrics go to ``registry`` (a private one if None; see ``registry``).
    """

    def __init__(self, config: MemoryBusConfig | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        self.config = config or MemoryBusConfig()
        self.registry = registry if registry is not None else CollectorRegistry()
        self._metrics = _Metrics(self.registry)
        self._cond = Condition()
        self._running = False
        self._logs: dict[str, list[_Log]] = {}
        self._groups: dict[str, _Group] = {}
        self._age_order: deque[tuple[str, _Log]] = deque()  # one entry per retained record
        self._retained_bytes = 0

    def start(self) -> None:
        with self._cond:
            self._running = True

    def stop(self) -> None:
        """Stop accepting records; pollers waiting now raise BusError."""
        with self._cond:
            self._running = False
            self._cond.notify_all()

    def publish(self, topic: str, key: bytes, values: Sequence[bytes],
                headers: Headers = ()) -> None:
        """Append ``values`` (each with ``headers``) in order to the partition of ``key``;
        never blocks."""
        with self._cond:
            self._require_running(f"publish to topic {topic!r}")
            partition = partition_for_key(key, self.config.partitions)
            log = self._topic(topic)[partition]
            now_ms = time.time_ns() // 1_000_000
            headers = tuple(headers)
            for value in values:
                log.append(Message(topic, partition, log.end, key, bytes(value), now_ms,
                                   headers))
                self._age_order.append((topic, log))
                self._retained_bytes += len(key) + len(value)
            self._metrics.published_to(topic).inc(len(values))
            self._enforce_retention()
            self._cond.notify_all()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Always True: a record is in its log as soon as ``publish`` returns."""
        return True

    def subscribe(self, topics: Sequence[str], group: str) -> MemoryConsumer:
        """Join ``group`` for ``topics``; the group's partitions are dealt again."""
        if not topics:
            raise BusError(f"group {group!r}: subscribe needs at least one topic")
        consumer = MemoryConsumer(self, tuple(topics), group)
        with self._cond:
            self._require_running(f"subscribe group {group!r} to {list(topics)}")
            self._join(consumer)
        return consumer

    def end_offsets(self, topic: str) -> list[int]:
        """Next offset of each partition of ``topic`` (0s for an unknown topic)."""
        with self._cond:
            return [log.end for log in self._logs.get(topic, [])] or [0] * self.config.partitions

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """Committed offset per partition of ``topic`` in ``group``."""
        with self._cond:
            known = self._groups.get(group, _Group()).committed
            return {p: off for (t, p), off in known.items() if t == topic}

    def read_positions(self, group: str, topic: str) -> dict[int, int]:
        """Per partition of ``topic``, the next offset ``group`` reads: its owner's
        position, else the committed offset (how far the group has read, which may
        be past what it has committed)."""
        with self._cond:
            known = self._groups.get(group, _Group())
            out = {p: off for (t, p), off in known.committed.items() if t == topic}
            for member in known.members:
                out.update({p: off for (t, p), off in member.positions.items() if t == topic})
            return out

    # -- internals, all called with self._cond held ------------------------------------

    def _require_running(self, what: str) -> None:
        if not self._running:
            raise BusError(f"memory bus cannot {what}: the bus is not started")

    def _topic(self, topic: str) -> list[_Log]:
        logs = self._logs.get(topic)
        if logs is None:
            logs = self._logs[topic] = [_Log() for _ in range(self.config.partitions)]
        return logs

    def _enforce_retention(self) -> None:
        limit_records, limit_bytes = self.config.retention_records, self.config.retention_bytes
        while self._age_order and (len(self._age_order) > limit_records
                                   or self._retained_bytes > limit_bytes):
            topic, log = self._age_order.popleft()
            record = log.drop_oldest()
            self._retained_bytes -= len(record.key) + len(record.value)
            self._metrics.dropped.labels(topic).inc()
        self._metrics.retained_records.set(len(self._age_order))
        self._metrics.retained_bytes.set(self._retained_bytes)

    def _join(self, consumer: MemoryConsumer) -> None:
        group = self._groups.setdefault(consumer.group, _Group())
        for topic in consumer.topics:
            self._topic(topic)
        group.members.append(consumer)
        self._rebalance(consumer.group)

    def _leave(self, consumer: MemoryConsumer) -> None:
        group = self._groups.get(consumer.group)
        if group is not None and consumer in group.members:
            group.members.remove(consumer)
            consumer.positions.clear()
            self._rebalance(consumer.group)

    def _evict_silent(self, group_name: str, now: float) -> None:
        group = self._groups[group_name]
        silent = [m for m in group.members if now - m.last_poll > self.config.member_timeout_s]
        for member in silent:
            self._leave(member)

    def _rebalance(self, group_name: str) -> None:
        """Deal each topic's partitions round-robin over its members, in join order."""
        group = self._groups[group_name]
        wanted: dict[MemoryConsumer, set[TopicPartition]] = {m: set() for m in group.members}
        for topic in {t for m in group.members for t in m.topics}:
            members = [m for m in group.members if topic in m.topics]
            for p in range(self.config.partitions):
                wanted[members[p % len(members)]].add((topic, p))
        for member, assigned in wanted.items():
            kept = {tp: off for tp, off in member.positions.items() if tp in assigned}
            for tp in assigned - kept.keys():
                kept[tp] = group.committed.get(tp, 0)
            member.positions = kept
        self._metrics.rebalances.labels(group_name).inc()

    def _read(self, consumer: MemoryConsumer, max_records: int) -> list[Message]:
        """Up to ``max_records`` from the member's partitions, starting at a rotating one."""
        out: list[Message] = []
        owned = sorted(consumer.positions)
        if not owned:
            return out
        consumer.rotation = (consumer.rotation + 1) % len(owned)
        for tp in owned[consumer.rotation:] + owned[:consumer.rotation]:
            if len(out) >= max_records:
                break
            log = self._logs[tp[0]][tp[1]]
            batch = log.read(consumer.positions[tp], max_records - len(out))
            if batch:
                consumer.positions[tp] = batch[-1].offset + 1
                self._metrics.delivered.labels(tp[0], consumer.group).inc(len(batch))
                out.extend(batch)
        return out


class MemoryConsumer:
    """A member of a MemoryBus consumer group (the ``Consumer`` protocol)."""

    def __init__(self, bus: MemoryBus, topics: tuple[str, ...], group: str) -> None:
        self.topics = topics
        self.group = group
        self.positions: dict[TopicPartition, int] = {}  # next offset of each owned partition
        self.last_poll = time.monotonic()
        self.rotation = 0
        self._bus = bus
        self._closed = False

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Message]:
        """Records after the member's positions; waits up to ``timeout_s`` for some."""
        bus = self._bus
        deadline = time.monotonic() + timeout_s
        with bus._cond:
            while True:
                self._check_usable("poll")
                now = time.monotonic()
                self.last_poll = now
                bus._evict_silent(self.group, now)
                if self not in bus._groups[self.group].members:
                    bus._join(self)
                records = bus._read(self, max_records)
                if records or now >= deadline:
                    return records
                bus._cond.wait(deadline - now)

    def commit(self, hold: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit the next offset of every partition this member owns now (no further
        than ``hold`` for the partitions in it)."""
        with self._bus._cond:
            self._check_usable("commit")
            done = self.positions if not hold else {
                tp: min(pos, hold.get(tp, pos)) for tp, pos in self.positions.items()}
            self._bus._groups[self.group].committed.update(done)

    def close(self) -> None:
        """Leave the group without committing; idempotent."""
        with self._bus._cond:
            if not self._closed:
                self._closed = True
                self._bus._leave(self)

    def assignment(self) -> set[TopicPartition]:
        """The (topic, partition) pairs this member owns now."""
        with self._bus._cond:
            return set(self.positions)

    def joining_s(self) -> float:
        """Always 0: a member joins within its poll, under the bus's lock."""
        return 0.0

    def caught_up(self) -> set[TopicPartition]:
        """The owned partitions whose every record this member has read."""
        with self._bus._cond:
            logs = self._bus._logs
            return {tp for tp, pos in self.positions.items()
                    if tp[0] in logs and pos >= logs[tp[0]][tp[1]].end}

    def _check_usable(self, what: str) -> None:
        if self._closed:
            raise BusError(f"group {self.group!r} member on {list(self.topics)}: "
                           f"cannot {what} after close")
        self._bus._require_running(f"{what} for group {self.group!r} on {list(self.topics)}")
