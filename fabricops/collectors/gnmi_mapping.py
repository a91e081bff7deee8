"""gNMI notifications to Frames: the pure half of the gNMI collector.

A notification becomes one Frame of the device at the notification's timestamp
(a timestamp of 0 is replaced by the receive time and reported; a negative one
sets the whole notification aside, reported). Every update is unpacked into
leaves (:mod:`fabricops.collectors.gnmi_values`: PROTO scalars, JSON and
JSON_IETF containers and lists) and each leaf's full path (the prefix, its
origin and target aside, joined to the update's path) is resolved with the
target's dialect profile (:mod:`fabricops.collectors.gnmi_dialects`): to a
sample of ``{device}:{interface}`` and a catalogue metric, to a named gap
(deliberately unsupported, counted by reason), or to nothing (unmapped,
counted by normalised path). Values that do not fit their metric's kind and
range, and values that cannot be unpacked (bad JSON, unknown encodings), are
counted and skipped; the rest still make the frame.

Deletes are applied before updates, as the gNMI specification orders them. A
delete of a port's own list entry (``/interfaces/interface[name=Ethernet5]``,
or an ancestor of every port's entry) publishes ``oper_status`` = 6
(notPresent, IF-MIB) for the port in the notification's frame: the port stops
being reported, and the pipeline's state-change events say so. A delete of a
single leaf publishes nothing and is counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

import numpy as np

from fabricops.collectors.gnmi_dialects import resolver_of
from fabricops.collectors.gnmi_dialects.rules import (
    LeafTarget,
    ProfileResolver,
    Unsupported,
    ValueMap,
)
from fabricops.collectors.gnmi_layout import Layout
from fabricops.collectors.gnmi_values import (
    SCALAR_KINDS,
    BadEncodingError,
    BadValueError,
    ListKeys,
    read_value,
    unpack,
    usual_json_number,
)
from fabricops.core.catalogue import CATALOGUE, Metric, MetricKind
from fabricops.core.frame import Frame, Source
from fabricops.core.openconfig import OcPath, PathElem, format_path

_CACHE_MAX: Final = 1 << 16
_LAYOUTS_MAX: Final = 256  # notification shapes remembered per device
_FAST: Final = {MetricKind.COUNTER: "uint_val", MetricKind.GAUGE: "double_val"}
_TS_LIMIT: Final = 2**63
NOT_PRESENT: Final = 6
_OPER_ID: Final = CATALOGUE.id_of("oper_status")


@dataclass(frozen=True)
class MappedNotification:
    """A notification's frame (None if nothing mapped) and what became of its leaves.

    ``leaves`` counts leaf updates after unpacking; ``mapped`` those that became
    samples; ``unsupported`` (by gap name) and ``unmapped_paths`` (by normalised
    path) those that name no metric; ``bad_values`` values outside their
    metric's kind or range; ``bad_encodings`` values that could not be
    unpacked. ``gone`` lists the ports a delete removed.
    """

    frame: Frame | None
    updates: int
    unmapped: int = 0
    bad_values: int = 0
    no_timestamp: bool = False
    problem: str | None = None  # the first skipped leaf, described
    bad_timestamp: bool = False
    leaves: int = 0
    mapped: int = 0
    bad_encodings: int = 0
    unsupported: dict[str, int] = field(default_factory=dict)
    unmapped_paths: dict[str, int] = field(default_factory=dict)
    deleted_leaves: int = 0
    gone: tuple[str, ...] = ()

    @property
    def errors(self) -> dict[str, int]:
        """What was skipped or patched, by the collector's error kind (zeros left out)."""
        counts = {"unmapped_path": self.unmapped, "bad_value": self.bad_values,
                  "bad_encoding": self.bad_encodings, "no_timestamp": int(self.no_timestamp),
                  "bad_timestamp": int(self.bad_timestamp)}
        return {kind: n for kind, n in counts.items() if n}


class _Hit(NamedTuple):
    entity: str
    metric_id: int
    fast: str | None  # the TypedValue field read as is (no value map, the usual type)
    metric: Metric
    value_map: ValueMap | None
    key: tuple[str, int]  # (entity, metric_id): the sample's key in a notification


class _Miss(NamedTuple):
    unsupported: bool
    label: str  # the gap's name, or the normalised path
    description: str


_Leaf = _Hit | _Miss


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


_KEYS: dict[str, ListKeys] = {}


def _list_keys(resolver: ProfileResolver) -> ListKeys:
    profile = resolver.profile
    found = _KEYS.get(profile.name)
    if found is None:
        found = _KEYS[profile.name] = ListKeys(
            [r.pattern for r in profile.rules] + list(profile.entity_lists))
    return found


class _Accumulator:
    """What one notification's leaves became (filled by ``NotificationMapper``)."""

    def __init__(self) -> None:
        self.samples: dict[tuple[str, int], int | float] = {}
        self.leaves = self.decoded = self.bad = self.unmapped = self.bad_encodings = 0
        self.unsupported: dict[str, int] = {}
        self.unmapped_paths: dict[str, int] = {}
        self.problem: str | None = None

    def note(self, problem: str) -> None:
        if self.problem is None:
            self.problem = problem


class NotificationMapper:
    """Maps one device's notifications to Frames with one dialect profile.

    Pure apart from its caches (resolved paths, bounded) and the set of ports
    seen (for deletes above every port's entry).
    """

    def __init__(self, device: str, profile: str = "openconfig") -> None:
        self.device = device
        self.resolver = resolver_of(profile)
        self.keys = _list_keys(self.resolver)
        self._proto: dict[tuple[bytes, bytes], _Leaf] = {}
        self._json: dict[tuple[str, OcPath], _Leaf] = {}
        self._known: set[str] = set()
        self._paths: dict[tuple[bytes, bytes], OcPath] = {}
        self._layouts: dict[tuple[tuple[str, int], ...], Layout] = {}

    def map(self, notification: Any, seq: int, received_ns: int) -> MappedNotification:
        """The frame of ``notification`` (a ``gnmi.Notification``) with sequence ``seq``."""
        prefix = notification.prefix
        origin = prefix.origin
        prefix_key = _prefix_key(prefix)
        prefix_path = self._oc_path(prefix_key, b"", prefix, None)
        acc = _Accumulator()
        gone, deleted_leaves = self._deletes(notification.delete, prefix_path, acc)
        samples, proto, known = acc.samples, self._proto, self._known
        room = len(known) < _CACHE_MAX
        fast = 0
        for update in notification.update:
            path, val = update.path, update.val
            kind = val.WhichOneof("value")
            path_key = path.SerializeToString()
            if kind in SCALAR_KINDS or kind is None:
                key = (prefix_key, path_key)
                leaf = proto.get(key) or self._cache(
                    proto, key, prefix_path + oc_path(path), path.origin or origin)
                if leaf.__class__ is _Hit and kind == leaf.fast:
                    # the usual leaf, as _take takes it, without a call
                    samples[leaf.key] = getattr(val, kind)
                    fast += 1
                    if room:
                        known.add(leaf.entity)
                    continue
                self._take(leaf, val, kind, acc)
                continue
            full = self._oc_path(prefix_key, path_key, path, prefix_path)
            try:
                leaves = unpack(full, val, self.keys)
            except BadEncodingError as exc:
                acc.leaves += 1
                acc.bad_encodings += 1
                acc.note(f"{format_path(full)}: {exc}")
                continue
            where = path.origin or origin
            for leaf_path, raw in leaves:
                jkey = (where, leaf_path)
                leaf = self._json.get(jkey) or self._cache(self._json, jkey, leaf_path, where)
                self._take(leaf, raw, None, acc)
        acc.leaves += fast
        acc.decoded += fast
        ts_ns = int(notification.timestamp)
        common: dict[str, Any] = {
            "leaves": acc.leaves, "bad_encodings": acc.bad_encodings,
            "unsupported": acc.unsupported, "unmapped_paths": acc.unmapped_paths,
            "deleted_leaves": deleted_leaves, "gone": tuple(gone)}
        if not 0 <= ts_ns < _TS_LIMIT:
            return MappedNotification(
                None, len(notification.update), acc.unmapped, acc.bad,
                problem=f"notification timestamp {ts_ns} is outside [0, 2**63) ns",
                bad_timestamp=True, **common)
        frame, out_of_range = self._frame(acc.samples, ts_ns or received_ns, seq)
        return MappedNotification(
            frame, len(notification.update), acc.unmapped, acc.bad + len(out_of_range),
            ts_ns == 0, acc.problem or next(iter(out_of_range), None),
            mapped=acc.decoded - len(out_of_range), **common)

    def _oc_path(self, prefix_key: bytes, path_key: bytes, path: Any,
                 prefix_path: OcPath | None) -> OcPath:
        """``prefix_path`` joined to ``path`` (or the prefix's own path), cached."""
        key = (prefix_key, path_key)
        found = self._paths.get(key)
        if found is None:
            found = (prefix_path or ()) + oc_path(path)
            if len(self._paths) >= _CACHE_MAX:
                self._paths.clear()
            self._paths[key] = found
        return found

    def _deletes(self, deletes: Any, prefix_path: OcPath,
                 acc: _Accumulator) -> tuple[list[str], int]:
        """Ports removed by ``deletes`` (their notPresent samples added), and leaf deletes."""
        gone: list[str] = []
        leaves = 0
        for d in deletes:
            port, everything = self.resolver.entity_of(prefix_path + oc_path(d))
            entities = [f"{self.device}:{port}"] if port else \
                sorted(self._known) if everything else []
            if not entities:
                leaves += 1
            for entity in entities:
                acc.samples[(entity, _OPER_ID)] = NOT_PRESENT
                self._known.discard(entity)
                gone.append(entity.removeprefix(f"{self.device}:"))
        return gone, leaves

    def _take(self, leaf: _Leaf, raw: Any, kind: str | None, acc: _Accumulator) -> None:
        acc.leaves += 1
        if isinstance(leaf, _Miss):
            if leaf.unsupported:
                acc.unsupported[leaf.label] = acc.unsupported.get(leaf.label, 0) + 1
            else:
                acc.unmapped += 1
                acc.unmapped_paths[leaf.label] = acc.unmapped_paths.get(leaf.label, 0) + 1
                acc.note(leaf.description)
            return
        key = leaf.key
        # a scalar leaf read as is was taken in ``map``; here: JSON leaves, other types
        if kind is None and leaf.fast is not None and \
                (number := usual_json_number(raw, leaf.fast)) is not None:
            acc.samples[key] = number
        else:
            try:
                acc.samples[key] = read_value(raw, leaf.metric, leaf.value_map)
            except BadValueError as exc:
                acc.bad += 1
                acc.note(f"{leaf.entity}: {exc}")
                return
        acc.decoded += 1
        if len(self._known) < _CACHE_MAX:
            self._known.add(leaf.entity)

    def _cache(self, cache: dict[Any, _Leaf], key: Any, full: OcPath, origin: str) -> _Leaf:
        found = self.resolver.resolve(full)
        leaf: _Leaf
        if isinstance(found, LeafTarget):
            fast = None if found.value_map is not None else _FAST.get(found.metric.kind)
            entity = f"{self.device}:{found.interface}"
            leaf = _Hit(entity, found.metric.id, fast, found.metric, found.value_map,
                        (entity, found.metric.id))
        elif isinstance(found, Unsupported):
            leaf = _Miss(True, found.name, found.reason)
        else:
            leaf = _Miss(False, self.resolver.normalise(origin, full),
                         f"path {format_path(full)} names no catalogue metric")
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        cache[key] = leaf
        return leaf

    def _frame(self, samples: dict[tuple[str, int], int | float], ts_ns: int,
               seq: int) -> tuple[Frame | None, list[str]]:
        """The frame of the samples within their metric's range, and the others described."""
        if not samples:
            return None, []
        keys = tuple(samples)
        values = list(samples.values())
        layout = self._layouts.get(keys)
        if layout is None:  # a new shape of notification: built and checked once
            frame = Frame.build(self.device, ts_ns, Source.GNMI, seq, [e for e, _ in keys],
                                np.fromiter((m for _, m in keys), np.uint16, len(keys)), values)
            if len(self._layouts) >= _LAYOUTS_MAX:
                self._layouts.clear()
            layout = self._layouts[keys] = Layout(frame)
        else:
            frame = layout.frame(self.device, ts_ns, seq, values)
        bad = layout.out_of_range(values)
        if not bad:
            return frame, []
        out = [_out_of_range(keys[i][0], keys[i][1], values[i]) for i in bad]
        dropped = set(bad)
        keep = [i for i in range(len(keys)) if i not in dropped]
        if not keep:
            return None, out
        return Frame.build(self.device, ts_ns, Source.GNMI, seq, [keys[i][0] for i in keep],
                           frame.metric[keep], [values[i] for i in keep]), out


def _out_of_range(entity: str, metric_id: int, value: float) -> str:
    metric = CATALOGUE.by_id(metric_id)
    return f"{entity}: {metric.name}: value {value!r} is outside {metric.valid}"
