"""Layout rules and value packing of :class:`~fabricops.core.frame.Frame`; legacy codec.

``layout_problem`` checks the rules every frame obeys; ``pack_values`` makes the ``raw``
column (gauges as float64 bits, counters and states as exact u64). ``encode_many``
concatenates records of ``Frame.encode``, each prefixed by its u32 byte length (run
files); ``decode_many`` reads them back with ``Frame.decode``.

Frames are written as Protocol Buffers records (:mod:`fabricops.core.wire_frame`). The
legacy codec below (``encode``, ``decode``) is kept to read frames written before (staged
frames in a store, run files) and to measure against. Codec version 1
(little-endian): ``b"FOF"``, u8 version, u8 source code, u8 flags, u64 seq, i64 ts_ns,
u16 device-name length + UTF-8, u32 n_entities, per entity (u16 length + UTF-8), u32
n_samples, entity_idx (u16 if flag bit 0 else u32), metric (u16), raw (u64).

``decode`` is the bus boundary, so it also refuses what the store cannot keep: a
``ts_ns`` below 0 (the header's i64 cannot exceed 2**63-1) and a ``seq`` of 2**63 or
more (both are signed 64-bit columns). Entity indices are checked against the table;
counters and states are u64 on the wire, so never negative nor past 2**64-1; gauges
may be NaN or infinite, which the store keeps bit for bit (``Frame.out_of_range``
tells them apart from plausible readings).

``fabricops.core.frame`` imports this module at its top and re-exports its public
names; this module binds ``frame`` at its bottom, so either can be imported first.
"""

from __future__ import annotations

import math
import struct
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

CODEC_VERSION: Final = 1
MAGIC: Final = b"FOF"
FLAG_IDX_U16: Final = 0x01  # entity_idx stored as u16 (only when n_entities <= 65536)
_U16_IDX_MAX_ENTITIES: Final = 65536
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_BODY_HEADER = struct.Struct("<BBQqH")  # source, flags, seq, ts_ns, device length
_U64_MAX: Final = 2**64 - 1
_STORE_SEQ_LIMIT: Final = 2**63
_TWO_64: Final = 2.0**64
_NUMBERS: Final = (int, float, np.integer, np.floating)

# Keyed by the Source values (Source is a StrEnum, so its members look these up).
_SOURCE_CODES: Final[dict[str, int]] = {"snmp": 1, "gnmi": 2, "int": 3, "sim": 4,
                                             "host": 5}
_SOURCE_BY_CODE: Final = {code: src for src, code in _SOURCE_CODES.items()}
_DTYPES: Final = (np.dtype(np.uint32), np.dtype(np.uint16), np.dtype(np.uint64))

# id(entity_idx) -> (weak ref to it, the entities tuple it passed the checks with). An
# entry goes when its array dies, so an id reused by another array never matches.
_LAYOUTS_MAX: Final = 1 << 16
_layouts: dict[int, tuple[weakref.ref[Any], tuple[str, ...]]] = {}


def layout_problem(source: object, ts_ns: object, seq: object, entities: Any,
                   idx: Any, metric: Any, raw: Any) -> str | None:
    """Why these fields are not a valid frame, or None.

    The entity table and index range are scanned once per (entities tuple, entity_idx
    array) pair, by identity: tuples are immutable and frame arrays are not modified.
    """
    entry = _layouts.get(id(idx))
    known = entry is not None and entry[1] is entities and entry[0]() is idx
    problem = (_scalar_problem(source, ts_ns, seq)
               or (None if known else _entities_problem(entities))
               or _array_problem(idx, metric, raw))
    if problem or known:
        return problem
    problem = index_problem(idx, len(entities))
    if problem:
        return problem
    if type(entities) is tuple:  # lists and tuple subclasses are checked every time
        if len(_layouts) >= _LAYOUTS_MAX:
            _layouts.clear()
        key = id(idx)
        _layouts[key] = (weakref.ref(idx, lambda ref: _forget_layout(key, ref)), entities)
    return None


def index_problem(idx: Any, n: int) -> str | None:
    """Why entity indices ``idx`` do not fit a table of ``n`` entities, or None."""
    if len(idx) and int(idx.max()) >= n:
        bad = int(np.flatnonzero(idx >= n)[0])
        return f"sample #{bad} has entity index {idx[bad]} but there are {n} entities"
    return None


def _forget_layout(key: int, ref: weakref.ref[Any]) -> None:
    if _layouts.get(key, (None,))[0] is ref:
        _layouts.pop(key, None)


def _scalar_problem(source: object, ts_ns: object, seq: object) -> str | None:
    if source not in _SOURCE_CODES:
        return f"unknown source {source!r}"
    if not isinstance(ts_ns, int) or not -(2**63) <= ts_ns < 2**63:
        return f"ts_ns {ts_ns!r} is not a signed 64-bit integer"
    if not isinstance(seq, int) or not 0 <= seq <= _U64_MAX:
        return f"seq {seq!r} is not an unsigned 64-bit integer"
    return None


def _entities_problem(entities: object) -> str | None:
    if not isinstance(entities, tuple | list) or not all(isinstance(e, str) for e in entities):
        return "entities must be a tuple of strings"
    if len(set(entities)) != len(entities):
        return "entities contains duplicates"
    return None


def _array_problem(idx: Any, metric: Any, raw: Any) -> str | None:
    nd, (u32, u16, u64) = np.ndarray, _DTYPES  # the common case first, without a loop
    if (isinstance(idx, nd) and isinstance(metric, nd) and isinstance(raw, nd)
            and idx.dtype == u32 and metric.dtype == u16 and raw.dtype == u64
            and idx.ndim == metric.ndim == raw.ndim == 1 and len(idx) == len(metric) == len(raw)):
        return None
    for name, arr, dtype in zip(("entity_idx", "metric", "raw"), (idx, metric, raw), _DTYPES,
                                strict=True):
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.dtype != dtype:
            got = f"{arr.dtype}[{arr.ndim}d]" if isinstance(arr, np.ndarray) else type(arr).__name__
            return f"{name} must be a 1-d {dtype} array, got {got}"
    if not len(idx) == len(metric) == len(raw):
        return f"array lengths differ: entity_idx {len(idx)}, metric {len(metric)}, raw {len(raw)}"
    return None


def encode(frame: fr.Frame) -> bytes:
    """Encode one frame with the legacy codec, version ``CODEC_VERSION``."""
    dev = _utf8(frame.device, "device name", frame.device)
    ents = [_utf8(e, f"entity {e!r}", frame.device) for e in frame.entities]
    small = len(ents) <= _U16_IDX_MAX_ENTITIES
    parts = [MAGIC, bytes([CODEC_VERSION]), _BODY_HEADER.pack(
        _SOURCE_CODES[frame.source], FLAG_IDX_U16 if small else 0,
        frame.seq, frame.ts_ns, len(dev)), dev, _U32.pack(len(ents))]
    parts.extend(_U16.pack(len(e)) + e for e in ents)
    idx_wire = "<u2" if small else "<u4"
    parts += [_U32.pack(frame.n_samples), frame.entity_idx.astype(idx_wire).tobytes(),
              frame.metric.astype("<u2").tobytes(), frame.raw.astype("<u8").tobytes()]
    return b"".join(parts)


def encode_many(frames: Iterable[fr.Frame]) -> bytes:
    """Concatenate ``Frame.encode`` records, each prefixed by its u32 byte length."""
    parts: list[bytes] = []
    for frame in frames:
        body = frame.encode()
        if len(body) > 0xFFFFFFFF:
            raise fr.FrameError(f"frame of device {frame.device!r} is too large for a batch")
        parts += [_U32.pack(len(body)), body]
    return b"".join(parts)


def decode_many(data: bytes | memoryview) -> list[fr.Frame]:
    """Inverse of ``encode_many``; FrameDecodeError names the frame number and cause."""
    reader = _Reader(data)
    frames: list[fr.Frame] = []
    while reader.remaining:
        where = f"batch frame #{len(frames)} at offset {reader.pos}"
        try:
            size = reader.u32("length prefix")
            frames.append(fr.Frame.decode(reader.take(size, "frame body")))
        except fr.FrameDecodeError as exc:
            raise fr.FrameDecodeError(f"{where}: {exc}") from None
    return frames


class _Reader:
    """Bounds-checked sequential reads from a byte buffer."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.buf = memoryview(data).cast("B")
        self.pos = 0

    @property
    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def need(self, n: int, what: str) -> None:
        """Raise FrameDecodeError unless ``n`` more bytes are present."""
        if n > self.remaining:
            raise fr.FrameDecodeError(
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
            raise fr.FrameDecodeError(f"{what} is not valid UTF-8: {exc.reason}") from None

    def array(self, n: int, wire: str, dtype: type[np.unsignedinteger[Any]], what: str) -> Any:
        size = np.dtype(wire).itemsize
        return np.frombuffer(self.take(n * size, what), dtype=wire).astype(dtype)


def decode(data: bytes | bytearray | memoryview) -> fr.Frame:
    """Decode one legacy frame filling ``data``; any defect raises FrameDecodeError naming
    the cause."""
    r = _Reader(data)
    code, flags, seq, ts_ns, device = _decode_header(r)
    n_ent = r.u32("entity count")
    if flags & FLAG_IDX_U16 and n_ent > _U16_IDX_MAX_ENTITIES:
        raise fr.FrameDecodeError(f"u16 entity indices flagged but there are {n_ent} entities")
    r.need(n_ent * 2, f"{n_ent} entity names")
    ents = tuple(r.text(r.u16(f"entity #{i} length"), f"entity #{i}") for i in range(n_ent))
    n = r.u32("sample count")
    idx_wire = "<u2" if flags & FLAG_IDX_U16 else "<u4"
    expected = n * (np.dtype(idx_wire).itemsize + 2 + 8)
    r.need(expected, f"arrays of {n} samples")
    if r.remaining > expected:
        raise fr.FrameDecodeError(f"{r.remaining - expected} trailing bytes after the frame")
    idx = r.array(n, idx_wire, np.uint32, "entity indices")
    metric = r.array(n, "<u2", np.uint16, "metric ids")
    raw = r.array(n, "<u8", np.uint64, "raw values")
    try:
        return fr.Frame(device, ts_ns, fr.Source(_SOURCE_BY_CODE[code]), seq, ents, idx,
                        metric, raw)
    except fr.FrameError as exc:
        raise fr.FrameDecodeError(str(exc)) from None


def _decode_header(r: _Reader) -> tuple[int, int, int, int, str]:
    """Check magic, version, source and flags; return (source code, flags, seq, ts_ns, device)."""
    magic = bytes(r.buf[:3])
    if magic != MAGIC[:len(magic)]:
        raise fr.FrameDecodeError(
            f"bad magic {magic!r}: not an encoded frame (expected {MAGIC!r})")
    r.take(3, "magic")
    version = r.take(1, "codec version")[0]
    if version != CODEC_VERSION:
        raise fr.FrameDecodeError(f"frame codec version {version} is not supported "
                                  f"(this build reads {CODEC_VERSION})")
    code, flags, seq, ts_ns, dev_len = _BODY_HEADER.unpack(r.take(_BODY_HEADER.size, "header"))
    if code not in _SOURCE_BY_CODE:
        raise fr.FrameDecodeError(f"unknown source code {code}")
    if flags & ~FLAG_IDX_U16:
        raise fr.FrameDecodeError(f"unknown flag bits 0x{flags & ~FLAG_IDX_U16:02x}")
    if ts_ns < 0:
        raise fr.FrameDecodeError(f"ts_ns {ts_ns} is before the Unix epoch (a frame's time "
                                  "must be 0 <= ts_ns < 2**63 ns)")
    if seq >= _STORE_SEQ_LIMIT:
        raise fr.FrameDecodeError(f"seq {seq} does not fit the store's signed 64-bit column "
                                  "(it must be below 2**63)")
    return code, flags, seq, ts_ns, r.text(dev_len, "device name")


def _utf8(text: str, what: str, device: str) -> bytes:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise fr.FrameError(
            f"frame of device {device!r}: {what} cannot be UTF-8: {exc}") from None
    if len(data) > 0xFFFF:
        raise fr.FrameError(f"frame of device {device!r}: {what} is over 65535 UTF-8 bytes")
    return data


def pack_values(values: Sequence[Any] | NDArray[Any], gauge: NDArray[np.bool_], where: str,
                label: Callable[[int], str]) -> NDArray[np.uint64]:
    """The raw column: gauges as float64 bits, others as exact uint64.

    FrameError starts with ``where`` and names a bad sample and its ``label(sample)``.
    """
    arr: NDArray[Any]
    if isinstance(values, np.ndarray):
        arr = values
    else:
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
    if arr.ndim != 1 or arr.dtype.kind not in "iufO":
        raise fr.FrameError(f"{where}: values must be a flat sequence of numbers")
    if arr.dtype.kind == "O" and not all(
            issubclass(t, _NUMBERS) and not issubclass(t, bool) for t in set(map(type, arr))):
        i = _first(arr, lambda v: _as_number(v) is not None)
        raise fr.FrameError(
            f"{where}: sample #{i} ({label(i)}) has value {arr[i]!r}, which is not a number")
    raw = np.empty(len(arr), dtype=np.uint64)
    for mask, convert in ((gauge, _float_bits), (~gauge, _exact_uint)):
        packed, bad = convert(arr[mask])
        if bad is not None:
            i = int(np.flatnonzero(mask)[bad])
            kind = "a real number" if convert is _float_bits else "an integer in [0, 2**64-1]"
            raise fr.FrameError(f"{where}: sample #{i} ({label(i)}) has value "
                                f"{arr[i:i + 1].tolist()[0]!r}, which is not {kind}")
        raw[mask] = packed
    return raw


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


def _is_real(v: object) -> bool:
    x = _as_number(v)
    return x is not None and (isinstance(x, float) or abs(x) < 2**1023)


def _is_uint64(v: object) -> bool:
    x = _as_number(v)
    if x is None or not 0 <= x <= _U64_MAX:
        return False
    return isinstance(x, int) or (math.isfinite(x) and x.is_integer())


from fabricops.core import frame as fr  # noqa: E402  (last: see the module docstring)
