"""A device's frame as gNMI leaves, and their Notifications encoded straight to bytes.

A target sends the same leaves of a device tick after tick, so each frame layout
(a device's entities and metric order) is turned into a ``LeafTable`` once: per
sample, its keyed OpenConfig path, that path's encoded bytes, the kind of its
metric and the YANG type of its leaf. A notification is then the cached paths
joined with freshly encoded values (PROTO, JSON or JSON_IETF, see
:mod:`~fabricops.simulator.agents.gnmi_typed`) under a prefix encoded once per
RPC. The bytes are standard protobuf of gnmi.proto 0.8.0 and parse with
``gnmi_pb2``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Final

import numpy as np
from numpy.typing import NDArray
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.catalogue import MetricKind
from fabricops.core.entities import EntityError, split_port
from fabricops.core.frame import Frame
from fabricops.core.openconfig import OcPath, OpenConfigSchema, matches
from fabricops.simulator.agents.gnmi_typed import (
    JSON,
    JSON_IETF,
    PROTO,
    ValueEncoder,
    field,
    leaf_type,
    value_encoder,
    varint,
)

__all__ = ["COUNTER", "GAUGE", "JSON", "JSON_IETF", "PROTO", "STATE", "SYNC_RESPONSE",
           "LeafTable", "LeafTables", "encode_notification", "get_response", "gnmi_path",
           "path_bytes", "prefix_bytes", "subscribe_response", "value_encoder", "varint"]

UNSERVED, COUNTER, GAUGE, STATE = -1, 0, 1, 2
_KIND_CODE: Final = {MetricKind.COUNTER: COUNTER, MetricKind.GAUGE: GAUGE,
                     MetricKind.STATE: STATE}
_TABLES_MAX: Final = 4096

SYNC_RESPONSE: Final[bytes] = gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString()
_PROTO_ENCODER: Final = value_encoder(PROTO)


def gnmi_path(path: OcPath, target: str = "") -> object:
    """``path`` as a ``gnmi.Path`` message."""
    elems = [gnmi_pb2.PathElem(name=e.name, key=dict(e.keys)) for e in path]
    return gnmi_pb2.Path(elem=elems, target=target)


def path_bytes(path: OcPath) -> bytes:
    """The serialized ``gnmi.Path`` of ``path``."""
    data: bytes = gnmi_path(path).SerializeToString(deterministic=True)  # type: ignore[attr-defined]
    return data


class LeafTable:
    """The leaves of one frame layout: per sample, its path, metric kind and YANG type."""

    def __init__(self, frame: Frame, schema: OpenConfigSchema, heads: dict[tuple[str, int], bytes]):
        catalogue = schema.catalogue
        names = [_ifname(e) for e in frame.entities]
        self.paths: list[OcPath | None] = []
        self.heads: list[bytes] = []
        self.kinds: list[int] = []
        self.types: list[int] = []
        self.digits: list[int] = []
        for e, m in zip(frame.entity_idx.tolist(), frame.metric.tolist(), strict=True):
            metric = catalogue.by_id(m) if catalogue.is_known[m] else None
            if names[e] is None or metric is None or not metric.family.sources.openconfig_path:
                self.paths.append(None)
                self.heads.append(b"")
                self.kinds.append(UNSERVED)
                self.types.append(0)
                self.digits.append(0)
                continue
            path = schema.leaf_path(metric, names[e] or "")
            key = (names[e] or "", m)
            if key not in heads:
                heads[key] = field(b"\x0a", path_bytes(path))
            typed = leaf_type(metric)
            self.paths.append(path)
            self.heads.append(heads[key])
            self.kinds.append(_KIND_CODE[metric.kind])
            self.types.append(typed.code)
            self.digits.append(typed.fraction_digits)
        self._selections: dict[tuple[OcPath, tuple[int, ...]], NDArray[np.intp]] = {}

    def select(self, pattern: OcPath, kinds: tuple[int, ...] = (COUNTER, GAUGE, STATE),
               ) -> NDArray[np.intp]:
        """Sample indices of the served leaves at or below ``pattern`` of the given kinds."""
        key = (pattern, kinds)
        found = self._selections.get(key)
        if found is None:
            hits = [i for i, p in enumerate(self.paths)
                    if p is not None and self.kinds[i] in kinds and matches(pattern, p)]
            found = np.array(hits, dtype=np.intp)
            self._selections[key] = found
        return found


def _ifname(entity: str) -> str | None:
    try:
        return split_port(entity)[1]
    except EntityError:
        return None


class LeafTables:
    """Thread-safe cache of LeafTables, shared by every RPC of a target.

    Paths do not name the device, so switches with the same interfaces and
    metric layout share one table.
    """

    def __init__(self, schema: OpenConfigSchema) -> None:
        self.schema = schema
        self._by_layout: dict[tuple[tuple[str, ...], bytes], LeafTable] = {}
        self._by_shape: dict[tuple[tuple[str | None, ...], bytes, bytes], LeafTable] = {}
        self._heads: dict[tuple[str, int], bytes] = {}
        self._lock = threading.Lock()

    def of(self, frame: Frame) -> LeafTable:
        key = (frame.entities, frame.metric.tobytes())
        table = self._by_layout.get(key)
        if table is None:
            shape = (tuple(_ifname(e) for e in frame.entities), frame.entity_idx.tobytes(),
                     key[1])
            with self._lock:
                if len(self._by_layout) >= _TABLES_MAX:
                    self._by_layout.clear()
                    self._by_shape.clear()
                table = self._by_shape.get(shape)
                if table is None:
                    table = self._by_shape[shape] = LeafTable(frame, self.schema, self._heads)
                self._by_layout[key] = table
        return table


def prefix_bytes(target: str = "", origin: str = "") -> bytes:
    """The serialized ``gnmi.Path`` a notification carries as its prefix: the target
    and origin a request named (empty fields are left out, as the spec asks)."""
    data: bytes = gnmi_pb2.Path(target=target, origin=origin).SerializeToString()
    return data


def encode_notification(table: LeafTable, raw: NDArray[np.uint64], indices: NDArray[np.intp],
                        ts_ns: int, prefix: bytes = b"",
                        encoder: ValueEncoder = _PROTO_ENCODER) -> bytes:
    """A ``gnmi.Notification`` of the leaves ``indices`` with values from ``raw``.

    ``ts_ns`` (ns since the epoch) is when the values were collected, never 0;
    ``prefix`` is a serialized ``gnmi.Path`` (``prefix_bytes``), left out when
    empty; ``encoder`` gives each value's TypedValue (``value_encoder``).
    """
    picked = raw[indices]
    ints, floats = picked.tolist(), picked.view(np.float64).tolist()
    heads, kinds, types, digits = table.heads, table.kinds, table.types, table.digits
    parts = [b"\x08", varint(max(ts_ns, 1))]
    if prefix:
        parts.append(field(b"\x12", prefix))
    for n, i in enumerate(indices.tolist()):
        value = encoder(types[i], digits[i], floats[n] if kinds[i] == GAUGE else ints[n])
        body = heads[i] + b"\x1a" + varint(len(value)) + value
        parts.append(b"\x22" + varint(len(body)) + body)
    return b"".join(parts)


def subscribe_response(notification: bytes) -> bytes:
    """A ``gnmi.SubscribeResponse`` carrying one encoded notification."""
    return field(b"\x0a", notification)


def get_response(notifications: Sequence[bytes]) -> bytes:
    """A ``gnmi.GetResponse`` carrying encoded notifications."""
    return b"".join(field(b"\x0a", n) for n in notifications)
