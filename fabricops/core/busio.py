"""Records on the bus: sinks that publish them, and decoders for consumers.

A frame travels as one record of ``<prefix>telemetry.v2``, encoded with
``Frame.encode``, keyed by its device name, so one device's frames stay in order
on one partition; its ``source`` header is the frame's source (``snmp``, ...).
INT reports travel on ``<prefix>int.v2`` as ``IntBatch`` records, one per sink
switch, keyed by the sink's node id (decimal), with ``source`` ``int``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from fabricops.core.bus import DEFAULT_PREFIX, Bus, Message, Topic, record_headers, topic_name
from fabricops.core.consumer import ConsumerLoop, ConsumerLoopConfig, GroupConsumer
from fabricops.core.frame import Frame, FrameDecodeError
from fabricops.core.intreport import IntBatch
from fabricops.core.records import Event
from fabricops.core.wire_frame import EntityTables


class BusFrameSink:
    """FrameSink that publishes each frame to the telemetry topic of ``bus``."""

    def __init__(self, bus: Bus, prefix: str = DEFAULT_PREFIX) -> None:
        self.bus = bus
        self.topic = topic_name(Topic.TELEMETRY, prefix)

    def publish_frames(self, frames: Sequence[Frame]) -> None:
        """Publish ``frames``, one batch per device and source, keeping each device's order."""
        batches: dict[tuple[str, str], list[bytes]] = {}
        for frame in frames:
            batches.setdefault((frame.device, frame.source.value), []).append(frame.encode())
        for (device, source), values in batches.items():
            self.bus.publish(self.topic, device.encode(), values,
                             record_headers(Topic.TELEMETRY, source))


def frames_from_messages(
    msgs: Iterable[Message], *, rejects: list[tuple[Message, str]] | None = None,
    tables: EntityTables | None = None, newest: dict[tuple[str, int], int] | None = None,
) -> list[Frame]:
    """Decode every message into a Frame, in the order given.

    A message that is not a valid frame raises FrameDecodeError naming its topic,
    partition and offset; if ``rejects`` is given, it is appended there with the
    cause instead, and decoding goes on. ``tables`` (a consumer's own, kept between
    batches) lets a device's frames share the entity table it sent before.
    ``newest``, if given, is kept up to date with the newest frame time read from
    each (topic, partition).
    """
    frames: list[Frame] = []
    for msg in msgs:
        try:
            frame = Frame.decode(msg.value, tables)
        except FrameDecodeError as exc:
            if rejects is None:
                raise FrameDecodeError(f"{msg.topic}[{msg.partition}]@{msg.offset}: "
                                       f"{exc}") from exc
            rejects.append((msg, str(exc)))
            continue
        frames.append(frame)
        if newest is not None:
            where = (msg.topic, msg.partition)
            if frame.ts_ns > newest.get(where, -1):
                newest[where] = frame.ts_ns
    return frames


class BusIntSink:
    """IntSink that publishes INT reports to the int topic, one record per sink switch."""

    def __init__(self, bus: Bus, prefix: str = DEFAULT_PREFIX) -> None:
        self.bus = bus
        self.topic = topic_name(Topic.INT, prefix)

    def publish_int(self, batch: IntBatch) -> None:
        if batch.n_reports == 0:
            return
        for sink in sorted(set(batch.sink.tolist())):
            part = batch.take(np.flatnonzero(batch.sink == sink))
            self.bus.publish(self.topic, str(sink).encode(), [part.encode()],
                             record_headers(Topic.INT, "int"))


def publish_events(bus: Bus, events: Sequence[Event], *, source: str,
                   prefix: str = DEFAULT_PREFIX) -> None:
    """Publish ``events`` on the events topic keyed by entity, so one entity's events stay in
    order on one partition; ``source`` names the producing component (``pipeline``, ...)."""
    by_entity: dict[str, list[bytes]] = {}
    for event in events:
        by_entity.setdefault(event.entity, []).append(event.encode())
    topic, headers = topic_name(Topic.EVENTS, prefix), record_headers(Topic.EVENTS, source)
    for entity, values in by_entity.items():
        bus.publish(topic, entity.encode(), values, headers)


__all__ = ["BusFrameSink", "BusIntSink", "ConsumerLoop", "ConsumerLoopConfig", "GroupConsumer",
           "frames_from_messages", "publish_events"]
