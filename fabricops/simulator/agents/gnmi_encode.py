"""A device's frame as gNMI leaves, and their Notifications encoded straight to bytes.

A target sends the same leaves of a device tick after tick, so each frame layout
(a device's entities and metric order) is turned into a ``LeafTable`` once: per
sample, its keyed OpenConfig path, that path's encoded bytes and the kind of its
value. A notification is then the cached paths joined with freshly encoded
values. The bytes are standard protobuf of gnmi.proto 0.8.0 and parse with
``gnmi_pb2``. Values: counters ``uint_val``, gauges ``double_val``, states
``string_val`` (oper-status ``"UP"``/``"DOWN"``); in JSON_IETF, RFC 7951 style
(64-bit counters as strings, gauges as numbers, states as strings).
"""

from __future__ import annotations

import math
import struct
import threading
from collections.abc import Sequence
from typing import Final

import numpy as np
from numpy.typing import NDArray
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.catalogue import MetricKind
from fabricops.core.entities import EntityError, split_port
from fabricops.core.frame import Frame
from fabricops.core.openconfig import OPER_STATUS_NAMES, OcPath, OpenConfigSchema, matches

PROTO: Final = gnmi_pb2.PROTO
JSON_IETF: Final = gnmi_pb2.JSON_IETF
UNSERVED, COUNTER, GAUGE, STATE = -1, 0, 1, 2
_KIND_CODE: Final = {MetricKind.COUNTER: COUNTER, MetricKind.GAUGE: GAUGE,
                     MetricKind.STATE: STATE}
_SMALL: Final = tuple(bytes((i,)) for i in range(128))
_DOUBLE: Final = struct.Struct("<d")
_TABLES_MAX: Final = 4096

SYNC_RESPONSE: Final[bytes] = gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString()


def varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer."""
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


def gnmi_path(path: OcPath, target: str = "") -> object:
    """``path`` as a ``gnmi.Path`` message."""
    elems = [gnmi_pb2.PathElem(name=e.name, key=dict(e.keys)) for e in path]
    return gnmi_pb2.Path(elem=elems, target=target)


def path_bytes(path: OcPath) -> bytes:
    """The serialized ``gnmi.Path`` of ``path``."""
    data: bytes = gnmi_path(path).SerializeToString(deterministic=True)  # type: ignore[attr-defined]
    return data


class LeafTable:
    """The leaves of one frame layout: per sample, its path and how its value encodes."""

    def __init__(self, frame: Frame, schema: OpenConfigSchema, heads: dict[tuple[str, int], bytes]):
        catalogue = schema.catalogue
        names = [_ifname(e) for e in frame.entities]
        self.paths: list[OcPath | None] = []
        self.heads: list[bytes] = []
        self.kinds: list[int] = []
        for e, m in zip(frame.entity_idx.tolist(), frame.metric.tolist(), strict=True):
            metric = catalogue.by_id(m) if catalogue.is_known[m] else None
            if names[e] is None or metric is None or not metric.family.sources.openconfig_path:
                self.paths.append(None)
                self.heads.append(b"")
                self.kinds.append(UNSERVED)
                continue
            path = schema.leaf_path(metric, names[e] or "")
            key = (names[e] or "", m)
            if key not in heads:
                heads[key] = _field(b"\x0a", path_bytes(path))
            self.paths.append(path)
            self.heads.append(heads[key])
            self.kinds.append(_KIND_CODE[metric.kind])
        self._kinds = np.array(self.kinds, dtype=np.int8)
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


def encode_notification(table: LeafTable, raw: NDArray[np.uint64], indices: NDArray[np.intp],
                        ts_ns: int, target: str, encoding: int = PROTO) -> bytes:
    """A ``gnmi.Notification`` of the leaves ``indices`` with values from ``raw``.

    ``prefix.target`` names the device; ``ts_ns`` (ns since the epoch) is the
    collection instant of the values, never 0.
    """
    picked = raw[indices]
    ints, floats = picked.tolist(), picked.view(np.float64).tolist()
    heads, kinds = table.heads, table.kinds
    encode = _proto_value if encoding == PROTO else _json_value
    parts = [b"\x08", varint(max(ts_ns, 1)),
             _field(b"\x12", _field(b"\x22", target.encode()))]
    for n, i in enumerate(indices.tolist()):
        kind = kinds[i]
        value = encode(kind, floats[n] if kind == GAUGE else ints[n])
        body = heads[i] + b"\x1a" + varint(len(value)) + value
        parts.append(b"\x22" + varint(len(body)) + body)
    return b"".join(parts)


_STATE_PROTO: Final = {code: _field(b"\x0a", name.encode())
                       for code, name in OPER_STATUS_NAMES.items()}
_STATE_JSON: Final = {code: _field(b"\x5a", f'"{name}"'.encode())
                      for code, name in OPER_STATUS_NAMES.items()}


def _proto_value(kind: int, value: int | float) -> bytes:
    if kind == COUNTER:
        return b"\x18" + varint(int(value))
    if kind == GAUGE:
        return b"\x71" + _DOUBLE.pack(value)
    return _STATE_PROTO.get(int(value)) or _field(b"\x0a", str(value).encode())


def _json_value(kind: int, value: int | float) -> bytes:
    if kind == COUNTER:
        return _field(b"\x5a", b'"%d"' % value)
    if kind == GAUGE:
        text = repr(float(value)) if math.isfinite(value) else f'"{value}"'
        return _field(b"\x5a", text.encode())
    return _STATE_JSON.get(int(value)) or _field(b"\x5a", b'"%d"' % value)


def subscribe_response(notification: bytes) -> bytes:
    """A ``gnmi.SubscribeResponse`` carrying one encoded notification."""
    return _field(b"\x0a", notification)


def get_response(notifications: Sequence[bytes]) -> bytes:
    """A ``gnmi.GetResponse`` carrying encoded notifications."""
    return b"".join(_field(b"\x0a", n) for n in notifications)
