"""What a gNMI subscription sends, frame by frame (no transport here).

A device's clock is its frames' timestamps, so intervals are in device time: a
1 s SAMPLE subscription gets one notification per simulated second, whatever
the simulation's speed, and never more often than the device produces frames.
STREAM subscriptions: SAMPLE sends the selected leaves every ``sample_interval``
(0: every frame; with ``suppress_redundant`` only the changed ones, all of them
every ``heartbeat_interval``); ON_CHANGE sends the leaves that changed (all of
them every ``heartbeat_interval``, if set); TARGET_DEFINED is ON_CHANGE for
states and SAMPLE every ``target_defined_interval_ns`` for the rest. Leaves due
in the same frame go out in one notification.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc
import numpy as np
from numpy.typing import NDArray
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.frame import Frame
from fabricops.core.openconfig import OcPath, PathElem
from fabricops.simulator.agents.gnmi_encode import (
    COUNTER,
    GAUGE,
    JSON_IETF,
    PROTO,
    STATE,
    LeafTable,
    LeafTables,
    encode_notification,
)

ALL_KINDS = (COUNTER, GAUGE, STATE)
SUPPORTED_ENCODINGS = (JSON_IETF, PROTO)


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
    if encoding not in SUPPORTED_ENCODINGS:
        name = gnmi_pb2.Encoding.Name(encoding) if encoding in gnmi_pb2.Encoding.values() \
            else str(encoding)
        raise GnmiError(grpc.StatusCode.UNIMPLEMENTED,
                        f"target {target!r}: encoding {name} is not supported; "
                        "use JSON_IETF or PROTO")
    return encoding


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

    def wanted(self, ts_ns: int) -> tuple[bool, bool]:
        """(send anything now, send everything now) at device time ``ts_ns``."""
        beat = self.heartbeat_ns > 0 and ts_ns >= self.beat_ns
        if beat:
            self.beat_ns = _next(self.beat_ns, self.heartbeat_ns, ts_ns)
        if self.on_change:
            return True, beat
        if ts_ns < self.due_ns:
            return beat, beat
        self.due_ns = _next(self.due_ns, self.interval_ns, ts_ns)
        return True, beat or not self.suppress_redundant


def _next(due: int, step: int, now: int) -> int:
    """The first of ``due + k*step`` after ``now`` (``now + 1`` if ``step`` is 0)."""
    if step <= 0:
        return now + 1
    if due <= 0:
        return now + step
    return due + ((now - due) // step + 1) * step


def subscriptions_of(sub_list: object, target_defined_interval_ns: int) -> list[Subscription]:
    """The subscriptions of a ``gnmi.SubscriptionList`` (prefix joined to each path)."""
    out: list[Subscription] = []
    prefix = sub_list.prefix  # type: ignore[attr-defined]
    for s in sub_list.subscription:  # type: ignore[attr-defined]
        pattern = path_of(prefix, s.path)
        common = {"heartbeat_ns": int(s.heartbeat_interval),
                  "suppress_redundant": bool(s.suppress_redundant)}
        if s.mode == gnmi_pb2.ON_CHANGE:
            out.append(Subscription(pattern, True, **common))  # type: ignore[arg-type]
        elif s.mode == gnmi_pb2.SAMPLE:
            out.append(Subscription(pattern, False, int(s.sample_interval),
                                    **common))  # type: ignore[arg-type]
        else:
            out.append(Subscription(pattern, True, kinds=(STATE,)))
            out.append(Subscription(pattern, False, target_defined_interval_ns,
                                    kinds=(COUNTER, GAUGE)))
    return out


@dataclass
class StreamState:
    """The leaves of one device a subscription has sent, and what it sends next."""

    target: str
    subscriptions: Sequence[Subscription]
    tables: LeafTables
    encoding: int = PROTO
    updates_sent: int = 0
    last_count: int = 0
    _table: LeafTable | None = None
    _sent: NDArray[np.uint64] = field(default_factory=lambda: np.zeros(0, np.uint64))

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
        """The notification a STREAM subscription sends at ``frame``, or None."""
        table = self._layout(frame)
        changed = frame.raw != self._sent
        parts = []
        for s in self.subscriptions:
            send, everything = s.wanted(frame.ts_ns)
            if send:
                chosen = table.select(s.pattern, s.kinds)
                parts.append(chosen if everything else chosen[changed[chosen]])
        if not parts:
            return None
        return self._encode(frame, np.unique(np.concatenate(parts)))

    def _encode(self, frame: Frame, indices: NDArray[np.intp]) -> bytes | None:
        if not len(indices) or self._table is None:
            return None
        self._sent[indices] = frame.raw[indices]
        self.updates_sent += len(indices)
        self.last_count = len(indices)
        return encode_notification(self._table, frame.raw, indices, frame.ts_ns, self.target,
                                   self.encoding)
