"""Records on the bus: sinks that publish them, and decoders for consumers.

A frame travels as one record of ``<prefix>telemetry.v1``, encoded with
``Frame.encode``, keyed by its device name, so one device's frames stay in order
on one partition. INT reports travel on ``<prefix>int.v1`` as ``IntBatch``
records, one per sink switch, keyed by the sink's node id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from fabricops.core.bus import DEFAULT_PREFIX, Bus, Message, Topic, topic_name
from fabricops.core.consumer import ConsumerLoop, ConsumerLoopConfig, GroupConsumer
from fabricops.core.frame import Frame, FrameDecodeError
from fabricops.core.intreport import IntBatch


class BusFrameSink:
    """FrameSink that publishes each frame to the telemetry topic of ``bus``."""

    def __init__(self, bus: Bus, prefix: str = DEFAULT_PREFIX) -> None:
        self.bus = bus
        self.topic = topic_name(Topic.TELEMETRY, prefix)

    def publish_frames(self, frames: Sequence[Frame]) -> None:
        """Publish ``frames``, one batch per device, keeping each device's order."""
        by_device: dict[str, list[bytes]] = {}
        for frame in frames:
            by_device.setdefault(frame.device, []).append(frame.encode())
        for device, values in by_device.items():
            self.bus.publish(self.topic, device.encode(), values)


def frames_from_messages(
    msgs: Iterable[Message], *, rejects: list[tuple[Message, str]] | None = None
) -> list[Frame]:
    """Decode every message into a Frame, in the order given.

    A message that is not a valid frame raises FrameDecodeError naming its topic,
    partition and offset; if ``rejects`` is given, it is appended there with the
    cause instead, and decoding goes on.
    """
    frames: list[Frame] = []
    for msg in msgs:
        try:
            frames.append(Frame.decode(msg.value))
        except FrameDecodeError as exc:
            if rejects is None:
                raise FrameDecodeError(f"{msg.topic}[{msg.partition}]@{msg.offset}: "
                                       f"{exc}") from exc
            rejects.append((msg, str(exc)))
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
            self.bus.publish(self.topic, str(sink).encode(), [part.encode()])


__all__ = ["BusFrameSink", "BusIntSink", "ConsumerLoop", "ConsumerLoopConfig", "GroupConsumer",
           "frames_from_messages"]
