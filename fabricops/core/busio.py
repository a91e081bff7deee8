"""Records on the bus: sinks that publish them, and decoders for consumers.

A frame travels as one record of ``<prefix>telemetry.v1``, encoded with
``Frame.encode``, keyed by its device name, so one device's frames stay in order
on one partition. INT reports travel on ``<prefix>int.v1`` as ``IntBatch``
records, one per sink switch, keyed by the sink's node id.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from fabricops.core.bus import DEFAULT_PREFIX, Bus, BusError, Consumer, Message, Topic, topic_name
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
    reason instead, and decoding goes on.
    """
    frames: list[Frame] = []
    for msg in msgs:
        try:
            frames.append(Frame.decode(msg.value))
        except FrameDecodeError as exc:
            reason = f"{msg.topic}[{msg.partition}]@{msg.offset}: {exc}"
            if rejects is None:
                raise FrameDecodeError(reason) from exc
            rejects.append((msg, reason))
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


def consume_until(stop: threading.Event, bus: Bus, topics: Sequence[str], group: str,
                  handle: Callable[[list[Message]], object], *,
                  consumer: Consumer | None = None, poll_timeout_s: float = 0.5,
                  max_records: int = 500,
                  on_bus_error: Callable[[BusError, float], None] | None = None) -> None:
    """Poll, ``handle`` a non-empty batch, commit, until ``stop`` is set.

    A commit follows ``handle``, so only handled work is committed. A bus that
    goes away (BusError) is reported to ``on_bus_error`` with the wait before
    retrying, waited out with a backoff doubling from 0.5 s to 10 s, and the
    group is joined again. The consumer is closed on the way out.
    """
    backoff = 0.5
    while not stop.is_set():
        try:
            if consumer is None:
                consumer = bus.subscribe(topics, group)
            messages = consumer.poll(poll_timeout_s, max_records)
            if messages:
                handle(messages)
            consumer.commit()
            backoff = 0.5
        except BusError as exc:
            if on_bus_error is not None:
                on_bus_error(exc, backoff)
            _close_quietly(consumer)
            consumer = None
            stop.wait(backoff)
            backoff = min(backoff * 2, 10.0)
    _close_quietly(consumer)


class GroupConsumer:
    """``consume_until`` on a daemon thread named ``name``, between ``start`` and ``stop``.

    Bus errors are logged by ``log`` with the wait before the retry.
    """

    def __init__(self, bus: Bus, topics: Sequence[str], group: str,
                 handle: Callable[[list[Message]], object], *, name: str,
                 log: logging.Logger) -> None:
        self.bus, self.topics, self.group, self.handle = bus, list(topics), group, handle
        self.name, self.log = name, log
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None

    def _run(self) -> None:
        consume_until(self._stop, self.bus, self.topics, self.group, self.handle,
                      on_bus_error=lambda e, w: self.log.warning(
                          "%s: bus error (%s); retry in %.1f s", self.name, e, w))


def _close_quietly(consumer: Consumer | None) -> None:
    if consumer is not None:
        with contextlib.suppress(BusError):
            consumer.close()
