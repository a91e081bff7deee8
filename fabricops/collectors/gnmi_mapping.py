"""gNMI notifications to Frames: the pure half of the gNMI collector.

A notification becomes one Frame of the device at the notification's timestamp
(a timestamp of 0 is replaced by the receive time and reported; a negative one
sets the whole notification aside, reported). Each update's path (notification
prefix joined to the update's path) is looked up in the OpenConfig schema of the
catalogue (:mod:`fabricops.core.openconfig`): the entity is
``{device}:{interface}``, the metric the catalogue's. Updates whose path names
no catalogue metric, or whose value does not fit the metric's kind and range
(``Metric.valid``: a counter an unsigned 64-bit integer, a state within its
enumeration, a gauge finite and within physical limits), are counted and
skipped; the rest still make the frame. Values are accepted in any scalar
TypedValue and in JSON / JSON_IETF (numbers or numeric strings); oper-status
as its OpenConfig name (``"UP"``, ``"DOWN"``, ...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from fabricops.core.catalogue import CATALOGUE, Metric, MetricKind
from fabricops.core.frame import Frame, Source
from fabricops.core.openconfig import (
    OPENCONFIG,
    OPER_STATUS_CODES,
    LeafRef,
    OcPath,
    OpenConfigSchema,
    PathElem,
    format_path,
)

_CACHE_MAX: Final = 1 << 16
_NUMERIC: Final = frozenset({"uint_val", "int_val", "double_val", "float_val", "string_val",
                             "ascii_val", "decimal_val", "json_val", "json_ietf_val"})
_FAST: Final = {MetricKind.COUNTER: "uint_val", MetricKind.GAUGE: "double_val"}
_STATE_CODES: Final[dict[str, dict[str, int]]] = {"oper_status": OPER_STATUS_CODES}
_TS_LIMIT: Final = 2**63
_MAX_DECIMAL_PRECISION: Final = 18  # gNMI Decimal64: "precision MUST NOT exceed 18"


@dataclass(frozen=True)
class MappedNotification:
    """A notification's frame (None if nothing mapped) and what was skipped, by cause.

    ``bad_values`` counts values outside their metric's kind or range;
    ``bad_timestamp`` is set when the timestamp is outside [0, 2**63) ns and every
    update was skipped.
    """

    frame: Frame | None
    updates: int
    unmapped: int = 0
    bad_values: int = 0
    no_timestamp: bool = False
    problem: str | None = None  # the first skipped update, described
    bad_timestamp: bool = False

    @property
    def errors(self) -> dict[str, int]:
        """What was skipped or patched, by the collector's error kind (zeros left out)."""
        counts = {"unmapped_path": self.unmapped, "bad_value": self.bad_values,
                  "no_timestamp": int(self.no_timestamp),
                  "bad_timestamp": int(self.bad_timestamp)}
        return {kind: n for kind, n in counts.items() if n}


class BadValueError(ValueError):
    """A TypedValue that does not fit a metric's kind; the message names both."""


def oc_path(*paths: Any) -> OcPath:
    """Join ``gnmi.Path`` messages (a prefix, then a path) into one OcPath."""
    return tuple(PathElem(e.name, tuple(sorted(e.key.items()))) for p in paths for e in p.elem)


def _prefix_key(prefix: Any) -> bytes:
    """The serialized prefix without its target (paths mean the same on every target)."""
    if not prefix.elem and not prefix.origin:
        return b""
    bare = type(prefix)()
    bare.CopyFrom(prefix)
    bare.ClearField("target")
    key: bytes = bare.SerializeToString()
    return key


def decode_value(value: Any, metric: Metric) -> int | float:
    """A ``gnmi.TypedValue`` as the metric's value: int for counters and states, else float."""
    kind = value.WhichOneof("value")
    if kind not in _NUMERIC:
        raise BadValueError(f"{metric.name}: {kind or 'empty'} value is not a number")
    raw: Any = getattr(value, kind)
    if kind == "decimal_val":
        if raw.precision > _MAX_DECIMAL_PRECISION:
            raise BadValueError(f"{metric.name}: decimal precision {raw.precision} is over "
                                f"{_MAX_DECIMAL_PRECISION}")
        raw = raw.digits / 10 ** raw.precision
    elif kind in ("json_val", "json_ietf_val"):
        try:
            raw = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise BadValueError(f"{metric.name}: {kind} is not JSON") from None
    if metric.kind is MetricKind.STATE and isinstance(raw, str):
        code = _STATE_CODES.get(metric.family.name, {}).get(raw.rpartition(":")[2])
        if code is None:
            raise BadValueError(f"{metric.name}: unknown state {raw!r}")
        return code
    return _number(raw, metric)


def _number(raw: Any, metric: Metric) -> int | float:
    try:
        if metric.kind is MetricKind.GAUGE:
            return float(raw)
        number = int(raw) if isinstance(raw, int | str) else float(raw)
    except (TypeError, ValueError, OverflowError):
        raise BadValueError(f"{metric.name}: value {raw!r:.40} is not a number") from None
    if isinstance(raw, bool) or not (isinstance(number, int) or number.is_integer()) \
            or not 0 <= number < 2**64:
        raise BadValueError(f"{metric.name}: value {raw!r} is not an unsigned 64-bit integer")
    return int(number)


class LeafResolver:
    """Resolves gNMI paths to catalogue leaves; shared by the mappers of every target.

    Keyed by the serialized prefix (without its target) and path. Serialization
    order of multi-key elements may vary, which only costs a second entry.
    Thread-safe (single dict operations); bounded, cleared when full.
    """

    def __init__(self, schema: OpenConfigSchema = OPENCONFIG) -> None:
        self.schema = schema
        self._cache: dict[tuple[bytes, bytes], LeafRef | str] = {}

    def resolve(self, prefix_key: bytes, prefix: Any, path: Any, path_key: bytes) -> LeafRef | str:
        """The leaf ``prefix`` + ``path`` names, or why it names none."""
        found = self._cache.get((prefix_key, path_key))
        if found is None:
            full = oc_path(prefix, path)
            found = self.schema.resolve(full) or \
                f"path {format_path(full)} names no catalogue metric"
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[(prefix_key, path_key)] = found
        return found


SHARED_RESOLVER: Final = LeafResolver()
_Leaf = tuple[str, int, str | None, Metric] | str  # (entity, metric id, fast field, metric)


class NotificationMapper:
    """Maps one device's notifications to Frames (pure, apart from its caches)."""

    def __init__(self, device: str, resolver: LeafResolver = SHARED_RESOLVER) -> None:
        self.device = device
        self.resolver = resolver
        self._cache: dict[bytes, dict[bytes, _Leaf]] = {}
        self._cached = 0

    def map(self, notification: Any, seq: int, received_ns: int) -> MappedNotification:
        """The frame of ``notification`` (a ``gnmi.Notification``) with sequence ``seq``."""
        prefix = notification.prefix
        prefix_key = _prefix_key(prefix)
        leaves = self._leaves_under(prefix_key)
        samples: dict[tuple[str, int], int | float] = {}
        unmapped = bad = 0
        problem: str | None = None
        for update in notification.update:
            path = update.path
            path_key = path.SerializeToString()
            leaf = leaves.get(path_key) or self._resolve(leaves, prefix_key, prefix, path, path_key)
            if isinstance(leaf, str):
                unmapped += 1
                problem = problem or leaf
                continue
            entity, metric_id, fast, metric = leaf
            value = update.val
            which = value.WhichOneof("value")
            if which == fast:
                samples[(entity, metric_id)] = getattr(value, which)
                continue
            try:
                samples[(entity, metric_id)] = decode_value(value, metric)
            except BadValueError as exc:
                bad += 1
                problem = problem or f"{entity}: {exc}"
        ts_ns = int(notification.timestamp)
        if not 0 <= ts_ns < _TS_LIMIT:
            return MappedNotification(
                None, len(notification.update), unmapped, bad, problem=f"notification "
                f"timestamp {ts_ns} is outside [0, 2**63) ns", bad_timestamp=True)
        frame, out_of_range = self._frame(samples, ts_ns or received_ns, seq)
        return MappedNotification(frame, len(notification.update), unmapped,
                                  bad + len(out_of_range), ts_ns == 0,
                                  problem or next(iter(out_of_range), None))

    def _leaves_under(self, prefix_key: bytes) -> dict[bytes, _Leaf]:
        leaves = self._cache.get(prefix_key)
        if leaves is None:
            if self._cached >= _CACHE_MAX:
                self._cache.clear()
                self._cached = 0
            leaves = self._cache[prefix_key] = {}
        return leaves

    def _resolve(self, leaves: dict[bytes, _Leaf], prefix_key: bytes, prefix: Any, path: Any,
                 path_key: bytes) -> _Leaf:
        """(entity, metric id, fast value field, metric) of a leaf, or why it maps to none."""
        ref = self.resolver.resolve(prefix_key, prefix, path, path_key)
        leaf: _Leaf = ref if isinstance(ref, str) else (
            f"{self.device}:{ref.interface}", ref.metric.id, _FAST.get(ref.metric.kind),
            ref.metric)
        if self._cached < _CACHE_MAX:
            leaves[path_key] = leaf
            self._cached += 1
        return leaf

    def _frame(self, samples: dict[tuple[str, int], int | float], ts_ns: int,
               seq: int) -> tuple[Frame | None, list[str]]:
        """The frame of the samples within their metric's range, and the others described."""
        if not samples:
            return None, []
        entities = [e for e, _ in samples]
        metrics = np.fromiter((m for _, m in samples), dtype=np.uint16, count=len(samples))
        values = list(samples.values())
        frame = Frame.build(self.device, ts_ns, Source.GNMI, seq, entities, metrics, values)
        bad = frame.out_of_range()
        if not bad.any():
            return frame, []
        out = [_out_of_range(entities[i], int(metrics[i]), values[i])
               for i in np.flatnonzero(bad).tolist()]
        keep = np.flatnonzero(~bad).tolist()
        if not keep:
            return None, out
        return Frame.build(self.device, ts_ns, Source.GNMI, seq, [entities[i] for i in keep],
                           metrics[keep], [values[i] for i in keep]), out


def _out_of_range(entity: str, metric_id: int, value: float) -> str:
    metric = CATALOGUE.by_id(metric_id)
    return f"{entity}: {metric.name}: value {value!r} is outside {metric.valid}"
