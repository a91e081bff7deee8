"""Frame: one device's samples at one collection instant.

A frame is columnar: sample ``i`` is entity ``entities[entity_idx[i]]``, concrete
metric id ``metric[i]`` (see :mod:`fabricops.core.catalogue`) and value ``raw[i]``.
Counters and states are stored as exact unsigned 64-bit integers; gauges as the
IEEE-754 float64 bit pattern, so every value fits one ``uint64`` column.

On the bus and in the store a frame is the Protocol Buffers record
``fabricops.telemetry.v2.Frame`` (:mod:`fabricops.core.wire_frame`, codec version 2).
Layout rules, value packing and the legacy binary codec (version 1, ``b"FOF"``, still
read for frames written before) live in :mod:`fabricops.core.frame_codec`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, cast

import numpy as np
from numpy.typing import NDArray

from fabricops.core import frame_codec, heap, wire_frame
from fabricops.core.catalogue import CATALOGUE, Catalogue, UnknownMetricError
from fabricops.core.frame_codec import FLAG_IDX_U16, MAGIC, decode_many, encode_many

__all__ = ["CODEC_VERSION", "FLAG_IDX_U16", "MAGIC", "SCHEMA", "Frame", "FrameDecodeError",
           "FrameError", "Source", "decode_many", "encode_many"]

CODEC_VERSION: Final = 2
"""What ``Frame.encode`` writes: 2 is the Protocol Buffers record ``SCHEMA``; 1 was the
legacy codec (``MAGIC``), which ``Frame.decode`` still reads."""
SCHEMA: Final = wire_frame.SCHEMA

_JSON_KEYS: Final = frozenset({"device", "ts_ns", "source", "seq", "samples", "entities"})
_SAMPLE_KEYS: Final = frozenset({"entity", "metric", "value"})

MetricsArg = Sequence[str | int] | NDArray[np.integer[Any]]
ValuesArg = Sequence[float | int] | NDArray[Any]


class Source(StrEnum):
    """The protocol a frame was collected with."""

    SNMP = "snmp"
    GNMI = "gnmi"
    INT = "int"
    SIM = "sim"
    HOST = "host"  # a host agent reading its NICs (sysfs, ethtool)


_SOURCE_VALUES: Final = frozenset(s.value for s in Source)


class FrameError(ValueError):
    """A frame that cannot be built or represented; the message names the cause."""


class FrameDecodeError(FrameError):
    """Bytes that are not a valid encoded frame; the message names the cause."""


class _Fields:
    """A frame's fields, as slots: what ``Frame`` holds, and what its bulk makers fill
    before they make the object a ``Frame`` (a class of the same layout whose fields
    cannot be set)."""

    __slots__ = ("device", "entities", "entity_idx", "metric", "raw", "seq", "source",
                 "ts_ns")
    device: str
    ts_ns: int
    source: Source
    seq: int
    entities: tuple[str, ...]
    entity_idx: NDArray[np.uint32]
    metric: NDArray[np.uint16]
    raw: NDArray[np.uint64]


_SLOTS: Final = _Fields.__dict__
"""The slot descriptors of a frame's fields (``restamp_each`` sets two through them)."""


@dataclass(frozen=True, eq=False)
class Frame(_Fields):
    """One device at one collection instant (see the module docstring for the layout).

    ``ts_ns`` is the collection time in ns since the Unix epoch (i64); ``seq`` the
    per-device sequence number (u64). ``decode`` accepts only what the store keeps:
    ``0 <= ts_ns < 2**63`` and ``seq < 2**63``. Arrays are stored as read-only views, not
    copies: do not modify an array after building a frame from it (a layout that
    passed the checks is not scanned again, see ``frame_codec.layout_problem``).
    Catalogue membership of ``metric`` is not checked here: see ``unknown_metrics``.
    A frame's fields are slots: no attribute dict, so a tick's thousands of frames are
    made and freed at a fraction of the cost.
    """

    __slots__ = ()
    device: str
    ts_ns: int
    source: Source
    seq: int
    entities: tuple[str, ...]
    entity_idx: NDArray[np.uint32]
    metric: NDArray[np.uint16]
    raw: NDArray[np.uint64]

    def __post_init__(self) -> None:
        ents, idx, metric, raw = self.entities, self.entity_idx, self.metric, self.raw
        problem = frame_codec.layout_problem(self.source, self.ts_ns, self.seq, ents, idx,
                                             metric, raw)
        if problem:
            raise FrameError(f"frame of device {self.device!r}: {problem}")
        put = object.__setattr__
        if type(self.source) is not Source:
            put(self, "source", Source(self.source))
        if type(ents) is not tuple:
            put(self, "entities", tuple(ents))
        for name, arr in (("entity_idx", idx), ("metric", metric), ("raw", raw)):
            view = arr.view()
            view.flags.writeable = False
            put(self, name, view)

    def __reduce__(self) -> tuple[type[Frame], tuple[Any, ...]]:
        """Pickled and copied as its fields (a frozen slotted object cannot take back a
        state by setting attributes); unpickling checks them again."""
        return Frame, (self.device, self.ts_ns, self.source, self.seq, self.entities,
                       self.entity_idx, self.metric, self.raw)

    @classmethod
    def trusted(cls, device: str, ts_ns: int, source: Source, seq: int,
                entities: tuple[str, ...], entity_idx: NDArray[np.uint32],
                metric: NDArray[np.uint16], raw: NDArray[np.uint64]) -> Frame:
        """A frame from parts its maker has checked already, without the checks: for a
        maker that emits the same layout every tick and checked it once with ``Frame``
        (the twin). The arrays must be read-only, of the frame's dtypes, and ``raw`` as
        long as ``entity_idx``; ``ts_ns`` and ``seq`` within what ``decode`` accepts."""
        parts = object.__new__(_Fields)
        parts.device, parts.ts_ns, parts.source, parts.seq = device, ts_ns, source, seq
        parts.entities, parts.entity_idx, parts.metric, parts.raw = (entities, entity_idx,
                                                                      metric, raw)
        parts.__class__ = Frame
        return cast(Frame, parts)

    def again(self, ts_ns: int, seq: int, raw: NDArray[np.uint64]) -> Frame:
        """This frame's device, source and layout with another time, sequence number and
        values, without the checks (as ``trusted``): ``raw`` read-only, uint64, as long
        as this frame's. For a maker that cuts the same layout every tick (the twin)."""
        return Frame.again_each((self,), ts_ns, (seq,), (raw,))[0]

    @staticmethod
    def again_each(likes: Sequence[Frame], ts_ns: int, seqs: Sequence[int],
                   raws: Sequence[NDArray[np.uint64]]) -> list[Frame]:
        """``like.again(ts_ns, seq, raw)`` for each ``like`` with its ``seq`` and ``raw``, in
        one loop, without a call each (the twin cuts thousands a tick), with the
        collector's young collections rare enough for such bulks to come and go between
        them (``heap.make_room``). Each frame is filled as ``_Fields`` (plain slot
        stores), then made a ``Frame``."""
        heap.make_room(len(likes))
        new = object.__new__
        out: list[_Fields] = []
        add = out.append
        for like, seq, raw in zip(likes, seqs, raws, strict=True):
            frame = new(_Fields)
            frame.device, frame.ts_ns, frame.source, frame.seq = (like.device, ts_ns,
                                                                  like.source, seq)
            frame.entities, frame.entity_idx, frame.metric, frame.raw = (
                like.entities, like.entity_idx, like.metric, raw)
            frame.__class__ = Frame
            add(frame)
        return cast(list[Frame], out)

    @staticmethod
    def restamp_each(frames: Sequence[Frame], ts_ns: int, seqs: Sequence[int]) -> None:
        """Give each of ``frames`` the time ``ts_ns`` and its sequence number, in place.

        Only for frames their maker holds and nothing else can reach (the twin's
        ``FramePool`` checks that by reference counts first): a frame is a value, and
        a holder would see it change."""
        # the slots' own setters: past the frozen __setattr__, at half object.__setattr__'s cost
        set_ts, set_seq = _SLOTS["ts_ns"].__set__, _SLOTS["seq"].__set__
        for frame, seq in zip(frames, seqs, strict=True):
            set_ts(frame, ts_ns)
            set_seq(frame, seq)

    @property
    def n_samples(self) -> int:
        return len(self.raw)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frame):
            return NotImplemented
        return (
            (self.device, self.ts_ns, self.source, self.seq, self.entities)
            == (other.device, other.ts_ns, other.source, other.seq, other.entities)
            and np.array_equal(self.entity_idx, other.entity_idx)
            and np.array_equal(self.metric, other.metric)
            and np.array_equal(self.raw, other.raw)
        )

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def build(
        cls, device: str, ts_ns: int, source: Source | str, seq: int,
        entities: Sequence[str], metrics: MetricsArg, values: ValuesArg,
        catalogue: Catalogue = CATALOGUE,
    ) -> Frame:
        """Build from per-sample entity ids, metric names or ids, and values.

        Gauges are stored as float64 bits; counters and states must be integers in
        [0, 2**64-1] and are stored exactly. Unknown metrics raise UnknownMetricError.
        """
        ids = _metric_ids(metrics, catalogue)
        return _assemble(device, ts_ns, source, seq, entities, ids, values, catalogue)

    def unknown_metrics(self, catalogue: Catalogue = CATALOGUE) -> NDArray[np.bool_]:
        """Per sample: True where the metric id is not in ``catalogue``."""
        return ~_lookup(catalogue.is_known, self.metric)

    def out_of_range(self, catalogue: Catalogue = CATALOGUE) -> NDArray[np.bool_]:
        """Per sample: True where the value is not a plausible reading of its metric.

        See ``Catalogue.out_of_range``: NaN or infinite gauges, states outside their
        enumeration, gauges past their physical limits. Unknown metrics are not flagged.
        """
        return catalogue.out_of_range(self.metric, self.raw)

    def values(self, catalogue: Catalogue = CATALOGUE) -> NDArray[np.float64]:
        """Every sample as float64: gauges reinterpreted, others (unknown too) converted."""
        out = self.raw.astype(np.float64)
        gauge = _lookup(catalogue.is_float, self.metric)
        out[gauge] = self.raw[gauge].view(np.float64)
        return out

    def to_json_dict(self, catalogue: Catalogue = CATALOGUE) -> dict[str, Any]:
        """A JSON-ready view; metric names, or ``"#<id>"`` for ids not in ``catalogue``.

        An ``"entities"`` key is added only when the entity table is not the
        first-appearance order of the samples, so ``from_json_dict`` is exact.
        """
        gauge = _lookup(catalogue.is_float, self.metric).tolist()
        ints, floats = self.raw.tolist(), self.raw.view(np.float64).tolist()
        names = {m: _metric_label(m, catalogue) for m in np.unique(self.metric).tolist()}
        ents = [self.entities[i] for i in self.entity_idx.tolist()]
        samples = [
            {"entity": e, "metric": names[m], "value": floats[i] if gauge[i] else ints[i]}
            for i, (e, m) in enumerate(zip(ents, self.metric.tolist(), strict=True))
        ]
        doc: dict[str, Any] = {"device": self.device, "ts_ns": self.ts_ns,
                               "source": str(self.source), "seq": self.seq, "samples": samples}
        if not _first_appearance_table(self.entity_idx, len(self.entities)):
            doc["entities"] = list(self.entities)
        return doc

    @classmethod
    def from_json_dict(cls, doc: Mapping[str, Any], catalogue: Catalogue = CATALOGUE) -> Frame:
        """Inverse of ``to_json_dict``; FrameError names the bad field or sample."""
        if not isinstance(doc, Mapping):
            raise FrameError(f"a frame document must be a mapping, not {type(doc).__name__}")
        extra = sorted(set(doc) - _JSON_KEYS)
        if extra:
            raise FrameError(f"frame document has unknown keys {extra}")
        device = _field(doc, "device", str, "frame")
        where = f"frame of device {device!r}"
        samples = _field(doc, "samples", list, where)
        rows = [_sample_row(s, i, where) for i, s in enumerate(samples)]
        ents, mets, vals = (list(col) for col in zip(*rows, strict=True)) if rows else ([], [], [])
        ids = np.array([_parse_metric(m, catalogue, where) for m in mets], dtype=np.uint16)
        table = doc.get("entities")
        if table is not None and not (isinstance(table, list) and _all_str(table)):
            raise FrameError(f"{where}: 'entities' must be a list of strings")
        ts_ns, seq = _field(doc, "ts_ns", int, where), _field(doc, "seq", int, where)
        source = _field(doc, "source", str, where)
        return _assemble(device, ts_ns, source, seq, ents, ids, vals, catalogue, table)

    def encode(self) -> bytes:
        """The ``SCHEMA`` record of this frame (see :mod:`fabricops.core.wire_frame`)."""
        return wire_frame.encode(self)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview,
               tables: wire_frame.EntityTables | None = None) -> Frame:
        """Decode one ``SCHEMA`` record, or a legacy one (``MAGIC``); any defect raises
        FrameDecodeError naming the cause. ``tables`` (see ``EntityTables``) lets frames
        of one device share their entity table."""
        if bytes(data[:3]) == MAGIC:
            return frame_codec.decode(data)
        return wire_frame.decode(data, tables)


def _all_str(items: Iterable[object]) -> bool:
    return all(isinstance(x, str) for x in items)


def _lookup(table: NDArray[np.bool_], ids: NDArray[Any]) -> NDArray[np.bool_]:
    """``table[ids]``, with False for ids outside the table."""
    ids = np.asarray(ids, dtype=np.int64)
    ok = (ids >= 0) & (ids < len(table))
    out = np.zeros(len(ids), dtype=bool)
    out[ok] = table[ids[ok]]
    return out


def _first_appearance_table(idx: NDArray[np.uint32], n_entities: int) -> bool:
    """True if entity ``k`` is the ``k``-th distinct entity met in sample order."""
    uniq, first = np.unique(idx, return_index=True)
    order = uniq[np.argsort(first)]
    return len(order) == n_entities and bool(np.array_equal(order, np.arange(n_entities)))


def _metric_label(metric_id: int, catalogue: Catalogue) -> str:
    """The metric's name, or ``"#<id>"`` if ``catalogue`` does not define it."""
    try:
        return catalogue.by_id(metric_id).name
    except UnknownMetricError:
        return f"#{metric_id}"


def _parse_metric(label: object, catalogue: Catalogue, where: str) -> int:
    """Inverse of ``_metric_label``."""
    if not isinstance(label, str):
        raise FrameError(f"{where}: metric {label!r} is not a string")
    if label.startswith("#"):
        digits = label[1:]
        if not (digits.isascii() and digits.isdigit() and int(digits) <= 0xFFFF):
            raise FrameError(f"{where}: metric {label!r} is not '#' and an id in 0..65535")
        return int(digits)
    return catalogue.id_of(label)


def _metric_ids(metrics: MetricsArg, catalogue: Catalogue) -> NDArray[np.uint16]:
    """Concrete ids of metric names or ids; UnknownMetricError names the first unknown."""
    if isinstance(metrics, np.ndarray) and metrics.dtype.kind in "iu":
        ids = metrics.astype(np.int64)
    else:
        table = {m: _known_id(m, catalogue) for m in dict.fromkeys(metrics)}
        ids = np.fromiter(map(table.__getitem__, metrics), dtype=np.int64, count=len(metrics))
    unknown = np.flatnonzero(~_lookup(catalogue.is_known, ids))
    if len(unknown):
        raise UnknownMetricError(f"unknown metric id {ids[unknown[0]]} (sample #{unknown[0]})")
    return ids.astype(np.uint16)


def _known_id(metric: object, catalogue: Catalogue) -> int:
    if isinstance(metric, str):
        return catalogue.id_of(metric)
    if isinstance(metric, int | np.integer) and not isinstance(metric, bool):
        return catalogue.by_id(int(metric)).id
    raise UnknownMetricError(f"metric {metric!r} is neither a name nor an id")


def _assemble(
    device: str, ts_ns: int, source: Source | str, seq: int, entities: Sequence[str],
    ids: NDArray[np.uint16], values: ValuesArg, catalogue: Catalogue,
    table: Sequence[str] | None = None,
) -> Frame:
    """Build a frame from per-sample columns; ``table`` fixes the entity order."""
    where = f"frame of device {device!r}"
    if not len(entities) == len(ids) == len(values):
        raise FrameError(f"{where}: {len(entities)} entities, {len(ids)} metrics and "
                         f"{len(values)} values given; they must be per sample")
    names = tuple(dict.fromkeys(entities) if table is None else table)
    index = {e: i for i, e in enumerate(names)}
    missing = set(entities) - index.keys()
    if missing:
        raise FrameError(f"{where}: entities {sorted(missing)} are not in the entity table")
    idx = np.fromiter(map(index.__getitem__, entities), dtype=np.uint32, count=len(entities))
    gauge = _lookup(catalogue.is_float, ids)
    raw = frame_codec.pack_values(
        values, gauge, where, lambda i: _metric_label(int(ids[i]), catalogue))
    if source not in _SOURCE_VALUES:
        raise FrameError(f"{where}: unknown source {source!r}")
    return Frame(device, ts_ns, Source(source), seq, names, idx, ids, raw)


def _field(doc: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = doc.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise FrameError(f"{where}: field {key!r} must be {kind.__name__}, got {value!r}")
    return value


def _sample_row(sample: object, i: int, where: str) -> tuple[str, object, object]:
    if not isinstance(sample, Mapping) or set(sample) != _SAMPLE_KEYS:
        raise FrameError(f"{where}: sample #{i} must be a mapping with keys "
                         f"{sorted(_SAMPLE_KEYS)}, got {sample!r}")
    if not isinstance(sample["entity"], str):
        raise FrameError(f"{where}: sample #{i} entity {sample['entity']!r} is not a string")
    return sample["entity"], sample["metric"], sample["value"]
