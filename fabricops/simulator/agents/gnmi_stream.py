"""What a gNMI subscription sends, frame by frame (no transport here).

A device's clock is its frames' timestamps, so intervals are in device time: a
1 s SAMPLE subscription gets one notification per simulated second, whatever
the simulation's speed. STREAM subscriptions: SAMPLE sends the selected leaves
every ``sample_interval`` (0: every frame; with ``suppress_redundant`` only the
changed ones, all of them every ``heartbeat_interval``); ON_CHANGE sends the
leaves that changed (all of them every ``heartbeat_interval``, if set);
TARGET_DEFINED is ON_CHANGE for states and SAMPLE every
``target_defined_interval_ns`` for the rest. Leaves due in the same frame go
out in one notification.

Intervals down to ``MIN_INTERVAL_NS`` (100 ms) are honoured even when frames
come less often (a twin ticking every second): a sample due between two frames
(``next_repeat_ns``, sent by ``repeat``) carries the newest frame's values with
that frame's timestamp, the time the values were collected (gNMI specification
3.5.2.3), so timestamps never run ahead of the device's clock and a collector
sees a repeated sample, not a made-up one. A sample due exactly when a frame is
due waits for that frame. Shorter intervals are refused with INVALID_ARGUMENT
(3.5.1.5.2), as are encodings outside the gNMI enumeration; BYTES and ASCII are
UNIMPLEMENTED (3.3.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import grpc
import numpy as np
from numpy.typing import NDArray
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.frame import Frame
from fabricops.core.openconfig import OcPath, PathElem
from fabricops.simulator.agents.gnmi_encode import (
    COUNTER,
    GAUGE,
    JSON,
    JSON_IETF,
    PROTO,
    STATE,
    LeafTable,
    LeafTables,
    encode_notification,
)
from fabricops.simulator.agents.gnmi_typed import ValueEncoder, value_encoder

ALL_KINDS = (COUNTER, GAUGE, STATE)
SUPPORTED_ENCODINGS: Final = (JSON, JSON_IETF, PROTO)
MIN_INTERVAL_NS: Final = 100_000_000


class GnmiError(Exception):
    """A request the target refuses: the gRPC status code and a message naming the cause."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def path_of(*paths: object) -> OcPath:
    """Join ``gnmi.Path`` messages (a prefix, then a path) into one OcPath."""
    elems: list[PathElem] = []
    for p in paths:
        for e in p.elem:  # type: ignore[attr-defined]
            elems.append(PathElem(e.name, tuple(sorted(e.key.items()))))
    return tuple(elems)


def check_encoding(encoding: int, target: str) -> int:
    """``encoding`` if the target serves it; GnmiError UNIMPLEMENTED for BYTES and ASCII,
    INVALID_ARGUMENT for a number outside the gNMI ``Encoding`` enumeration."""
    if encoding in SUPPORTED_ENCODINGS:
        return encoding
    if encoding not in gnmi_pb2.Encoding.values():
        raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT,
                        f"target {target!r}: encoding {encoding} is not a gNMI encoding")
    raise GnmiError(grpc.StatusCode.UNIMPLEMENTED,
                    f"target {target!r}: encoding {gnmi_pb2.Encoding.Name(encoding)} is not "
                    "supported; use JSON, JSON_IETF or PROTO")


@dataclass
class Subscription:
    """One subscribed path and how it is sent; ``due_ns``/``beat_ns`` are its schedule."""

    pattern: OcPath
    on_change: bool
    interval_ns: int = 0
    heartbeat_ns: int = 0
    suppress_redundant: bool = False
    kinds: tuple[int, ...] = ALL_KINDS
    due_ns: int = 0
    beat_ns: int = 0

    def wanted(self, ts_ns: int, new_frame: bool = True) -> tuple[bool, bool]:
        """(send anything now, send everything now) at device time ``ts_ns``, at a new
        frame or between two (a SAMPLE every frame, ``interval_ns`` 0, waits for one)."""
        beat = self.heartbeat_ns > 0 and ts_ns >= self.beat_ns
        if beat:
            self.beat_ns = _next(self.beat_ns, self.heartbeat_ns, ts_ns)
        if self.on_change:
            return True, beat
        if ts_ns < self.due_ns or not (new_frame or self.interval_ns):
            return beat, beat
        self.due_ns = _next(self.due_ns, self.interval_ns, ts_ns)
        return True, beat or not self.suppress_redundant

    def next_due_ns(self) -> int | None:
        """The next device time a sample or heartbeat of this subscription is due, if any."""
        dues = [d for d, step in ((self.due_ns, 0 if self.on_change else self.interval_ns),
                                  (self.beat_ns, self.heartbeat_ns)) if step > 0]
        return min(dues, default=None)


def _next(due: int, step: int, now: int) -> int:
    """The first of ``due + k*step`` after ``now`` (``now + 1`` if ``step`` is 0)."""
    if step <= 0:
        return now + 1
    if due <= 0:
        return now + step
    return due + ((now - due) // step + 1) * step


def _interval(value: int, what: str, target: str) -> int:
    if 0 < value < MIN_INTERVAL_NS:
        raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT,
                        f"target {target!r}: {what} {value} ns is below the target's minimum "
                        f"of {MIN_INTERVAL_NS} ns ({MIN_INTERVAL_NS // 1_000_000} ms)")
    return value


def subscriptions_of(sub_list: object, target_defined_interval_ns: int,
                     target: str = "") -> list[Subscription]:
    """The subscriptions of a ``gnmi.SubscriptionList`` (prefix joined to each path);
    GnmiError INVALID_ARGUMENT for an interval below ``MIN_INTERVAL_NS``."""
    out: list[Subscription] = []
    prefix = sub_list.prefix  # type: ignore[attr-defined]
    for s in sub_list.subscription:  # type: ignore[attr-defined]
        pattern = path_of(prefix, s.path)
        heartbeat = _interval(int(s.heartbeat_interval), "heartbeat_interval", target)
        suppress = bool(s.suppress_redundant)
        if s.mode == gnmi_pb2.ON_CHANGE:
            out.append(Subscription(pattern, True, heartbeat_ns=heartbeat,
                                    suppress_redundant=suppress))
        elif s.mode == gnmi_pb2.SAMPLE:
            interval = _interval(int(s.sample_interval), "sample_interval", target)
            out.append(Subscription(pattern, False, interval, heartbeat, suppress))
        else:
            out.append(Subscription(pattern, True, kinds=(STATE,)))
            out.append(Subscription(pattern, False, target_defined_interval_ns,
                                    kinds=(COUNTER, GAUGE)))
    return out


@dataclass
class StreamState:
    """The leaves of one device a subscription has sent, and what it sends next.

    ``prefix`` is the serialized prefix every notification carries (``prefix_bytes``);
    ``encoder`` encodes values (``value_encoder``).
    """

    target: str
    subscriptions: Sequence[Subscription]
    tables: LeafTables
    encoding: int = PROTO
    prefix: bytes = b""
    encoder: ValueEncoder | None = None
    updates_sent: int = 0
    last_count: int = 0
    _table: LeafTable | None = None
    _sent: NDArray[np.uint64] = field(default_factory=lambda: np.zeros(0, np.uint64))

    def __post_init__(self) -> None:
        if self.encoder is None:
            self.encoder = value_encoder(self.encoding)

    def _layout(self, frame: Frame) -> LeafTable:
        table = self.tables.of(frame)
        if table is not self._table or len(self._sent) != frame.n_samples:
            self._table = table
            self._sent = np.zeros(frame.n_samples, np.uint64)
        return table

    def selection(self, frame: Frame) -> NDArray[np.intp]:
        """Every subscribed leaf of ``frame`` (sample indices, sorted, no repeats)."""
        table = self._layout(frame)
        parts = [table.select(s.pattern, s.kinds) for s in self.subscriptions]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.intp)

    def snapshot(self, frame: Frame) -> bytes | None:
        """A notification of every subscribed leaf (initial updates, ONCE, POLL)."""
        self.prime(frame)
        return self._encode(frame, self.selection(frame))

    def prime(self, frame: Frame) -> None:
        """Start the schedules at ``frame`` and take its values as sent (``updates_only``)."""
        self._layout(frame)
        self._sent[:] = frame.raw
        for s in self.subscriptions:
            s.due_ns = _next(0, s.interval_ns, frame.ts_ns)
            s.beat_ns = _next(0, s.heartbeat_ns, frame.ts_ns)

    def step(self, frame: Frame) -> bytes | None:
        """The notification a STREAM subscription sends at a new ``frame``, or None."""
        return self._at(frame, frame.ts_ns, new_frame=True)

    def next_repeat_ns(self, frame: Frame, next_frame_ns: int) -> int | None:
        """The first device time after ``frame`` and before ``next_frame_ns`` (when the
        next frame is due) at which something is due, or None."""
        dues = [d for s in self.subscriptions if (d := s.next_due_ns()) is not None
                and frame.ts_ns < d < next_frame_ns]
        return min(dues, default=None)

    def repeat(self, frame: Frame, at_ns: int) -> bytes | None:
        """What is due at device time ``at_ns``, between ``frame`` and the next: the
        newest values, stamped with ``frame``'s timestamp (see the module docstring)."""
        return self._at(frame, at_ns, new_frame=False)

    def _at(self, frame: Frame, now_ns: int, new_frame: bool) -> bytes | None:
        table = self._layout(frame)
        changed = frame.raw != self._sent
        parts = []
        for s in self.subscriptions:
            send, everything = s.wanted(now_ns, new_frame)
            if send:
                chosen = table.select(s.pattern, s.kinds)
                parts.append(chosen if everything else chosen[changed[chosen]])
        if not parts:
            return None
        return self._encode(frame, np.unique(np.concatenate(parts)))

    def _encode(self, frame: Frame, indices: NDArray[np.intp]) -> bytes | None:
        if not len(indices) or self._table is None or self.encoder is None:
            return None
        self._sent[indices] = frame.raw[indices]
        self.updates_sent += len(indices)
        self.last_count = len(indices)
        return encode_notification(self._table, frame.raw, indices, frame.ts_ns, self.prefix,
                                   self.encoder)
