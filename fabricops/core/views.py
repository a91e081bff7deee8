"""Readable JSON views of whatever travels on the bus, by topic.

Used by ``fabricops tail``: a record that cannot be decoded is shown as such
(with its size and the reason), never dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fabricops.core.actions import Action
from fabricops.core.bus import Message, Topic
from fabricops.core.deadletter import DeadLetter
from fabricops.core.frame import Frame
from fabricops.core.intreport import IntBatch
from fabricops.core.records import Diagnosis, Event, SamplingPolicy
from fabricops.core.wire_records import WireModel


def _frame(value: bytes) -> Iterator[dict[str, Any]]:
    yield Frame.decode(value).to_json_dict()


def _int(value: bytes) -> Iterator[dict[str, Any]]:
    yield from IntBatch.decode(value).reports()


def _record(kind: type[WireModel]) -> Callable[[bytes], Iterator[dict[str, Any]]]:
    def view(value: bytes) -> Iterator[dict[str, Any]]:
        yield kind.decode(value).model_dump(mode="json")

    return view


VIEWS: dict[Topic, Callable[[bytes], Iterator[dict[str, Any]]]] = {
    Topic.TELEMETRY: _frame,
    Topic.INT: _int,
    Topic.CONTROL: _record(SamplingPolicy),
    Topic.EVENTS: _record(Event),
    Topic.DEAD_LETTERS: _record(DeadLetter),
    Topic.DIAGNOSES: _record(Diagnosis),
    Topic.ACTIONS: _record(Action),
}


def topic_of(name: str, prefix: str) -> Topic | None:
    """The logical topic of a wire topic name, or None if it is not one of ours."""
    bare = name.removeprefix(prefix)
    return next((t for t in Topic if t.value == bare), None)


def view(msg: Message, prefix: str) -> Iterator[dict[str, Any]]:
    """Readable records of one message (an INT batch gives one per report)."""
    topic = topic_of(msg.topic, prefix)
    head = {"topic": msg.topic, "partition": msg.partition, "offset": msg.offset,
            "key": msg.key.decode(errors="replace")}
    decode = VIEWS.get(topic) if topic is not None else None
    if decode is None:
        yield {**head, "bytes": len(msg.value)}
        return
    try:
        for record in decode(msg.value):
            yield {**head, **record}
    except (ValueError, KeyError) as exc:
        yield {**head, "bytes": len(msg.value), "undecodable": str(exc)}
