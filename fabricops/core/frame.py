"""Frame: one device's samples at one collection instant, and its binary codec.

A frame is columnar: sample ``i`` is entity ``entities[entity_idx[i]]``, concrete
metric id ``metric[i]`` (see :mod:`fabricops.core.catalogue`) and value ``raw[i]``.
Counters and states are stored as exact unsigned 64-bit integers; gauges as the
IEEE-754 float64 bit pattern, so every value fits one ``uint64`` column.

Codec version 1 (little-endian): ``b"FOF"``, u8 version, u8 source code, u8 flags,
u64 seq, i64 ts_ns, u16 device-name length + UTF-8, u32 n_entities, per entity
(u16 length + UTF-8), u32 n_samples, entity_idx (u16 if flag bit 0 else u32),
metric (u16), raw (u64). ``encode_many`` concatenates frames, each prefixed by
its u32 byte length.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from fabricops.core.catalogue import CATALOGUE, Catalogue, UnknownMetricError

CODEC_VERSION: Final = 1
MAGIC: Final = b"FOF"
FLAG_IDX_U16: Final = 0x01  # entity_idx stored as u16 (only when n_entities <= 65536)
_U16_IDX_MAX_ENTITIES: Final = 65536
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_BODY_HEADER = struct.Struct("<BBQqH")  # source, flags, seq, ts_ns, device length
_U64_MAX: Final = 2**64 - 1
_TWO_64: Final = 2.0**64
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


_SOURCE_CODES: Final[dict[Source, int]] = {
    Source.SNMP: 1, Source.GNMI: 2, Source.INT: 3, Source.SIM: 4,
}
_SOURCE_BY_CODE: Final = {code: src for src, code in _SOURCE_CODES.items()}
_SOURCE_VALUES: Final = frozenset(s.value for s in Source)


class FrameError(ValueError):
    """A frame that cannot be built or represented; the message names the cause."""


class FrameDecodeError(FrameError):
    """Bytes that are not a valid encoded frame; the message names the cause."""


@dataclass(frozen=True, eq=False)
class Frame:
    """One device at one collection instant (see the module docstring for the layout).

    ``ts_ns`` is the collection time in ns since the Unix epoch (i64); ``seq`` the
    per-device sequence number (u64). Arrays are stored as read-only views.
    Catalogue membership of ``metric`` is not checked here: see ``unknown_metrics``.
    """

    device: str
    ts_ns: int
    source: Source
    seq: int
    entities: tuple[str, ...]
    entity_idx: NDArray[np.uint32]
    metric: NDArray[np.uint16]
    raw: NDArray[np.uint64]

    def __post_init__(self) -> None:
        problem = _scalar_problem(self) or _array_problem(self)
        if problem:
            raise FrameError(f"frame of device {self.device!r}: {problem}")
        object.__setattr__(self, "source", Source(self.source))
        object.__setattr__(self, "entities", tuple(self.entities))
        for name in ("entity_idx", "metric", "raw"):
            view = getattr(self, name).view()
            view.flags.writeable = False
            object.__setattr__(self, name, view)

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
        """Encode with codec version ``CODEC_VERSION``."""
        dev = _utf8(self.device, "device name", self.device)
        ents = [_utf8(e, f"entity {e!r}", self.device) for e in self.entities]
        small = len(ents) <= _U16_IDX_MAX_ENTITIES
        parts = [MAGIC, bytes([CODEC_VERSION]), _BODY_HEADER.pack(
            _SOURCE_CODES[self.source], FLAG_IDX_U16 if small else 0,
            self.seq, self.ts_ns, len(dev)), dev, _U32.pack(len(ents))]
        parts.extend(_U16.pack(len(e)) + e for e in ents)
        parts.append(_U32.pack(self.n_samples))
        parts.append(self.entity_idx.astype("<u2" if small else "<u4").tobytes())
        parts.append(self.metric.astype("<u2").tobytes())
        parts.append(self.raw.astype("<u8").tobytes())
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes | memoryview) -> Frame:
        """Decode one frame; any defect raises FrameDecodeError naming the cause."""
        return _decode(_Reader(data))


def encode_many(frames: Iterable[Frame]) -> bytes:
    """Concatenate encoded frames, each prefixed by its u32 byte length."""
    parts: list[bytes] = []
    for frame in frames:
        body = frame.encode()
        if len(body) > 0xFFFFFFFF:
            raise FrameError(f"frame of device {frame.device!r} is too large for a batch")
        parts += [_U32.pack(len(body)), body]
    return b"".join(parts)


def decode_many(data: bytes | memoryview) -> list[Frame]:
    """Inverse of ``encode_many``; FrameDecodeError names the frame number and cause."""
    reader, frames = _Reader(data), list[Frame]()
    while reader.remaining:
        where = f"batch frame #{len(frames)} at offset {reader.pos}"
        try:
            size = reader.u32("length prefix")
            frames.append(Frame.decode(reader.take(size, "frame body")))
        except FrameDecodeError as exc:
            raise FrameDecodeError(f"{where}: {exc}") from None
    return frames


class _Reader:
    """Bounds-checked sequential reads from a byte buffer."""

    def __init__(self, data: bytes | memoryview) -> None:
        self.buf = memoryview(data).cast("B")
        self.pos = 0

    @property
    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def need(self, n: int, what: str) -> None:
        """Raise FrameDecodeError unless ``n`` more bytes are present."""
        if n > self.remaining:
            raise FrameDecodeError(
                f"frame truncated: {what} needs {n} bytes at offset {self.pos}, but only "
                f"{self.remaining} are present (buffer is {len(self.buf)} bytes)")

    def take(self, n: int, what: str) -> memoryview:
        self.need(n, what)
        self.pos += n
        return self.buf[self.pos - n:self.pos]

    def u16(self, what: str) -> int:
        return int(_U16.unpack(self.take(2, what))[0])

    def u32(self, what: str) -> int:
        return int(_U32.unpack(self.take(4, what))[0])

    def text(self, n: int, what: str) -> str:
        try:
            return str(self.take(n, what), "utf-8")
        except UnicodeDecodeError as exc:
            raise FrameDecodeError(f"{what} is not valid UTF-8: {exc.reason}") from None

    def array(self, n: int, wire: str, dtype: type[np.unsignedinteger[Any]], what: str) -> Any:
        size = np.dtype(wire).itemsize
        return np.frombuffer(self.take(n * size, what), dtype=wire).astype(dtype)


def _decode(r: _Reader) -> Frame:
    """Decode one frame that fills the whole reader buffer."""
    code, flags, seq, ts_ns, device = _decode_header(r)
    n_ent = r.u32("entity count")
    if flags & FLAG_IDX_U16 and n_ent > _U16_IDX_MAX_ENTITIES:
        raise FrameDecodeError(f"u16 entity indices flagged but there are {n_ent} entities")
    r.need(n_ent * 2, f"{n_ent} entity names")
    ents = tuple(r.text(r.u16(f"entity #{i} length"), f"entity #{i}") for i in range(n_ent))
    n = r.u32("sample count")
    idx_wire = "<u2" if flags & FLAG_IDX_U16 else "<u4"
    expected = n * (np.dtype(idx_wire).itemsize + 2 + 8)
    r.need(expected, f"arrays of {n} samples")
    if r.remaining > expected:
        raise FrameDecodeError(f"{r.remaining - expected} trailing bytes after the frame")
    idx = r.array(n, idx_wire, np.uint32, "entity indices")
    metric = r.array(n, "<u2", np.uint16, "metric ids")
    raw = r.array(n, "<u8", np.uint64, "raw values")
    try:
        return Frame(device, ts_ns, _SOURCE_BY_CODE[code], seq, ents, idx, metric, raw)
    except FrameError as exc:
        raise FrameDecodeError(str(exc)) from None


def _decode_header(r: _Reader) -> tuple[int, int, int, int, str]:
    """Check magic, version, source and flags; return (source code, flags, seq, ts_ns, device)."""
    magic = bytes(r.buf[:3])
    if magic != MAGIC[:len(magic)]:
        raise FrameDecodeError(f"bad magic {magic!r}: not an encoded frame (expected {MAGIC!r})")
    r.take(3, "magic")
    version = r.take(1, "codec version")[0]
    if version != CODEC_VERSION:
        raise FrameDecodeError(f"frame codec version {version} is not supported "
                               f"(this build reads {CODEC_VERSION})")
    code, flags, seq, ts_ns, dev_len = _BODY_HEADER.unpack(r.take(_BODY_HEADER.size, "header"))
    if code not in _SOURCE_BY_CODE:
        raise FrameDecodeError(f"unknown source code {code}")
    if flags & ~FLAG_IDX_U16:
        raise FrameDecodeError(f"unknown flag bits 0x{flags & ~FLAG_IDX_U16:02x}")
    return code, flags, seq, ts_ns, r.text(dev_len, "device name")


def _scalar_problem(f: Frame) -> str | None:
    if f.source not in _SOURCE_VALUES:
        return f"unknown source {f.source!r}"
    if not isinstance(f.ts_ns, int) or not -(2**63) <= f.ts_ns < 2**63:
        return f"ts_ns {f.ts_ns!r} is not a signed 64-bit integer"
    if not isinstance(f.seq, int) or not 0 <= f.seq <= _U64_MAX:
        return f"seq {f.seq!r} is not an unsigned 64-bit integer"
    if not isinstance(f.entities, tuple | list) or not _all_str(f.entities):
        return "entities must be a tuple of strings"
    if len(set(f.entities)) != len(f.entities):
        return "entities contains duplicates"
    return None


def _array_problem(f: Frame) -> str | None:
    for name, dtype in (("entity_idx", np.uint32), ("metric", np.uint16), ("raw", np.uint64)):
        arr = getattr(f, name)
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.dtype != dtype:
            got = f"{arr.dtype}[{arr.ndim}d]" if isinstance(arr, np.ndarray) else type(arr).__name__
            return f"{name} must be a 1-d {np.dtype(dtype)} array, got {got}"
    if not len(f.entity_idx) == len(f.metric) == len(f.raw):
        return (f"array lengths differ: entity_idx {len(f.entity_idx)}, "
                f"metric {len(f.metric)}, raw {len(f.raw)}")
    bad = np.flatnonzero(f.entity_idx >= len(f.entities))
    if len(bad):
        return (f"sample #{bad[0]} has entity index {f.entity_idx[bad[0]]} "
                f"but there are {len(f.entities)} entities")
    return None


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
    raw = _pack_values(values, gauge, ids, catalogue, where)
    if source not in _SOURCE_VALUES:
        raise FrameError(f"{where}: unknown source {source!r}")
    return Frame(device, ts_ns, Source(source), seq, names, idx, ids, raw)


def _pack_values(values: ValuesArg, gauge: NDArray[np.bool_], ids: NDArray[np.uint16],
                 catalogue: Catalogue, where: str) -> NDArray[np.uint64]:
    """Gauges as float64 bits, others as exact uint64; FrameError names a bad sample."""
    arr = values if isinstance(values, np.ndarray) else _object_array(values)
    if arr.ndim != 1 or arr.dtype.kind not in "iufO":
        raise FrameError(f"{where}: values must be a flat sequence of numbers")
    if arr.dtype.kind == "O" and not all(map(_is_number_type, set(map(type, arr)))):
        i = _first(arr, lambda v: _as_number(v) is not None)
        raise FrameError(f"{where}: sample #{i} ({_metric_label(int(ids[i]), catalogue)}) "
                         f"has value {arr[i]!r}, which is not a number")
    raw = np.empty(len(arr), dtype=np.uint64)
    for mask, convert in ((gauge, _float_bits), (~gauge, _exact_uint)):
        packed, bad = convert(arr[mask])
        if bad is not None:
            i = int(np.flatnonzero(mask)[bad])
            kind = "a real number" if convert is _float_bits else "an integer in [0, 2**64-1]"
            raise FrameError(f"{where}: sample #{i} ({_metric_label(int(ids[i]), catalogue)}) "
                             f"has value {arr[i:i + 1].tolist()[0]!r}, which is not {kind}")
        raw[mask] = packed
    return raw


def _object_array(values: Sequence[Any]) -> NDArray[np.object_]:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _float_bits(a: NDArray[Any]) -> tuple[NDArray[np.uint64], int | None]:
    """(float64 bit patterns, index of the first value that is not a real number)."""
    try:
        return a.astype(np.float64).view(np.uint64), None
    except (TypeError, ValueError, OverflowError):
        return a[:0].astype(np.uint64), _first(a, _is_real)


def _exact_uint(a: NDArray[Any]) -> tuple[NDArray[np.uint64], int | None]:
    """(exact uint64 values, index of the first value that is not a u64 integer)."""
    if a.dtype.kind == "u":
        return a.astype(np.uint64), None
    if a.dtype.kind in "if":
        ok = (a >= 0) & (a < _TWO_64) & (np.floor(a) == a) if a.dtype.kind == "f" else a >= 0
        bad = np.flatnonzero(~ok)
        return a[ok].astype(np.uint64), (int(bad[0]) if len(bad) else None)
    try:
        out = a.astype(np.uint64)
        if np.array_equal(out.astype(np.float64), a.astype(np.float64)):
            return out, None
    except (TypeError, ValueError, OverflowError):
        pass
    return a[:0].astype(np.uint64), _first(a, _is_uint64)


def _first(a: NDArray[Any], good: Any) -> int:
    """Index of the first element of ``a`` for which ``good`` is false (0 if none)."""
    return next((i for i, v in enumerate(a.tolist()) if not good(v)), 0)


def _as_number(v: object) -> int | float | None:
    """``v`` as a Python int or float, or None if it is not a (non-bool) number."""
    v = v.item() if isinstance(v, np.generic) else v
    return None if isinstance(v, bool) or not isinstance(v, int | float) else v


def _is_number_type(t: type) -> bool:
    return issubclass(t, int | float | np.integer | np.floating) and not issubclass(t, bool)


def _is_real(v: object) -> bool:
    x = _as_number(v)
    return x is not None and (isinstance(x, float) or abs(x) < 2**1023)


def _is_uint64(v: object) -> bool:
    x = _as_number(v)
    if x is None or not 0 <= x <= _U64_MAX:
        return False
    return isinstance(x, int) or (math.isfinite(x) and x.is_integer())


def _utf8(text: str, what: str, device: str) -> bytes:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FrameError(f"frame of device {device!r}: {what} cannot be UTF-8: {exc}") from None
    if len(data) > 0xFFFF:
        raise FrameError(f"frame of device {device!r}: {what} is over 65535 UTF-8 bytes")
    return data


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
