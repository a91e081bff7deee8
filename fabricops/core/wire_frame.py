"""Frame on the wire: message ``fabricops.telemetry.v2.Frame``, encoded on NumPy arrays.

``encode`` writes exactly the bytes protobuf's own serializer writes for the
same message (fields in number order, zero scalars and empty columns left
out), with the three columns as packed fixed-width arrays. ``decode`` reads
any valid encoding of the message (see :mod:`fabricops.core.wire_columns`)
and is the bus boundary, so it checks what the store needs as the legacy
codec did (see :mod:`fabricops.core.frame_codec`): ``0 <= ts_ns < 2**63``,
``seq < 2**63``, a known source, ``n_samples`` equal to the length of every
column, metric ids within 16 bits, entity indices within the table, no
duplicate entities. Any defect raises ``FrameDecodeError`` naming it.

The field numbers and types are read from the schema at import; a schema
that no longer fits this codec fails the import with ``SchemaError``.

``fabricops.core.frame`` imports this module at its top; this module binds
``frame`` and ``frame_codec`` (which shares the index check) at its bottom, so
any of them can be imported first.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Final, NamedTuple

import numpy as np
from google.protobuf.descriptor import FieldDescriptor
from numpy.typing import NDArray

from fabricops.core import wire_schema
from fabricops.core.bus import Topic
from fabricops.core.wire_columns import (
    WT_LEN,
    WT_VARINT,
    Kind,
    WireError,
    as_bytes,
    column,
    key,
    packed,
    read_varint,
    scan,
    signed64,
    varint,
)

SCHEMA: Final = Topic.TELEMETRY.schema
_STORE_LIMIT: Final = 2**63
_FD = FieldDescriptor
# name -> (how scan keeps it, the proto type this codec writes)
_LAYOUT: Final = {
    "n_samples": (Kind.VARINT, _FD.TYPE_UINT32), "device": (Kind.STRING, _FD.TYPE_STRING),
    "ts_ns": (Kind.VARINT, _FD.TYPE_INT64), "source": (Kind.VARINT, _FD.TYPE_ENUM),
    "seq": (Kind.VARINT, _FD.TYPE_UINT64), "entities": (Kind.STRINGS, _FD.TYPE_STRING),
    "entity_idx": (Kind.FIXED32S, _FD.TYPE_FIXED32), "metric": (Kind.FIXED32S, _FD.TYPE_FIXED32),
    "raw": (Kind.FIXED64S, _FD.TYPE_FIXED64),
}


def _numbers() -> dict[str, int]:
    fields = wire_schema.message_descriptor(SCHEMA).fields_by_name
    for name, (_, proto_type) in _LAYOUT.items():
        field = fields.get(name)
        if field is None or field.type != proto_type:
            raise wire_schema.SchemaError(f"{SCHEMA}.{name} is not the field type "
                                          f"{proto_type} the frame codec writes")
    return {name: fields[name].number for name in _LAYOUT}


_N: Final = _numbers()
_KINDS: Final = {_N[name]: kind for name, (kind, _) in _LAYOUT.items()}
_TAG: Final = {name: key(_N[name], WT_VARINT if kind == Kind.VARINT else WT_LEN)
               for name, (kind, _) in _LAYOUT.items()}
_U4, _U8 = np.dtype("<u4"), np.dtype("<u8")
_LITTLE: Final = sys.byteorder == "little"
# one-byte keys of the scalar fields ``encode`` writes before the entity table
_HEAD: Final = {key(_N[name], WT_VARINT if kind == Kind.VARINT else WT_LEN)[0]: kind
                for name, (kind, _) in _LAYOUT.items()
                if kind in (Kind.VARINT, Kind.STRING) and _N[name] < 16}
_BODY: Final = {_N["entities"], _N["entity_idx"], _N["metric"], _N["raw"]}


@functools.cache
def _source_numbers() -> dict[Any, int]:
    enum = wire_schema.message_descriptor(SCHEMA).fields_by_name["source"].enum_type
    return wire_schema.enum_numbers(enum, fr.Source)


@functools.cache
def _sources() -> dict[int, Any]:
    return {number: source for source, number in _source_numbers().items()}


def encode(frame: fr.Frame) -> bytes:
    """The record of ``frame``; FrameError if a name cannot be UTF-8."""
    n, tag = frame.n_samples, _TAG
    parts: list[bytes] = []
    if n:
        parts += (tag["n_samples"], varint(n))
    try:
        device = frame.device.encode()
        if device:
            parts += (tag["device"], varint(len(device)), device)
        if frame.ts_ns:
            parts += (tag["ts_ns"], varint(frame.ts_ns))
        parts += (tag["source"], varint(_source_numbers()[frame.source]))
        if frame.seq:
            parts += (tag["seq"], varint(frame.seq))
        entity = tag["entities"]
        for name in frame.entities:
            data = name.encode()
            parts += (entity, varint(len(data)), data)
    except UnicodeEncodeError as exc:
        raise fr.FrameError(f"frame of device {frame.device!r}: a name cannot be UTF-8: "
                            f"{exc}") from None
    parts += packed(tag["entity_idx"], frame.entity_idx, _U4)
    parts += packed(tag["metric"], frame.metric, _U4)
    parts += packed(tag["raw"], frame.raw, _U8)
    return b"".join(parts)


class EntityTables:
    """What each device's last record looked like, for ``decode``: a device sends the
    same table frame after frame.

    * A table that equals the one the device sent before is the same tuple again,
      checked once.
    * A record that is the device's last record with only ``ts_ns``, ``seq`` and the
      values changed (the same bytes from the entity table up to the values, which
      end it) is read without parsing the table again: its names and index and
      metric columns are those of the last record, checked then.

    Holds at most ``max_devices`` devices (then starts over).
    """

    def __init__(self, max_devices: int = 1 << 17) -> None:
        self.max_devices = max_devices
        self._last: dict[str, tuple[str, ...]] = {}
        self._records: dict[str, _Record] = {}

    def known(self, device: str, entities: tuple[str, ...]) -> tuple[str, ...] | None:
        """The tuple ``device`` sent before if it equals ``entities``, else None."""
        last = self._last.get(device)
        return last if last is not None and (last is entities or last == entities) else None

    def keep(self, device: str, entities: tuple[str, ...]) -> None:
        if len(self._last) >= self.max_devices:
            self._last.clear()
            self._records.clear()
        self._last[device] = entities

    def recall(self, buf: bytes, head: _Head) -> fr.Frame | None:
        """The frame of ``buf`` (its ``_head``) if it repeats its device's last record
        (see above)."""
        if head is None:
            return None
        values, at = head
        record = self._records.get(values.get(_N["device"], ""))
        if record is None or values.get(_N["n_samples"], 0) != len(record.metric) or \
                len(buf) - at - len(record.middle) != 8 * len(record.metric) or \
                not buf.startswith(record.middle, at):
            return None
        raw = np.frombuffer(buf, _U8, len(record.metric), at + len(record.middle))
        return fr.Frame.trusted(*_checked(values), record.entities, record.entity_idx,
                                record.metric, raw)

    def remember(self, buf: bytes, head: _Head, frame: fr.Frame) -> None:
        """Keep ``buf`` (the record ``frame`` was decoded from; its ``_head``) for
        ``recall`` where it is the usual layout: head fields, then the table and
        columns, the values last."""
        tail = 8 * frame.n_samples
        if head is None or not _LITTLE or len(buf) - head[1] < tail:
            return
        at = head[1]
        body = buf[at:]
        try:
            rest = scan(body, _KINDS)
        except WireError:
            return
        raw = rest.get(_N["raw"], [])
        if not set(rest) <= _BODY or len(raw) != 1 or len(raw[0]) != frame.n_samples or \
                _offset(raw[0], body) != len(body) - tail:
            return
        if frame.device not in self._records and len(self._records) >= self.max_devices:
            self._records.clear()
        self._records[frame.device] = _Record(buf[at:len(buf) - tail], frame.entities,
                                              frame.entity_idx, frame.metric)


def _offset(view: NDArray[Any], of: bytes) -> int:
    """Where the array ``view`` (read from ``of`` by ``np.frombuffer``) starts in it."""
    start: int = view.__array_interface__["data"][0]
    base: int = np.frombuffer(of, np.uint8).__array_interface__["data"][0]
    return start - base


class _Record(NamedTuple):
    middle: bytes  # from the entity table up to the values
    entities: tuple[str, ...]
    entity_idx: NDArray[np.uint32]
    metric: NDArray[np.uint16]


_Head = tuple[dict[int, Any], int] | None


def _head(buf: bytes) -> _Head:
    """The leading scalar fields (``_HEAD``) and where the rest begins; None where one
    of them is not as ``encode`` writes it (``decode`` then reads the whole record)."""
    values: dict[int, Any] = {}
    pos, end = 0, len(buf)
    try:
        while pos < end:
            tag = buf[pos]
            kind = _HEAD.get(tag)
            if kind is None:
                return values, pos
            if kind == Kind.VARINT:
                values[tag >> 3], pos = read_varint(buf, pos + 1)
            else:
                n = buf[pos + 1]
                if n >= 0x80 or pos + 2 + n > end:
                    return None
                values[tag >> 3] = buf[pos + 2:pos + 2 + n].decode()
                pos += 2 + n
    except (WireError, IndexError, UnicodeDecodeError):
        return None
    return values, pos


def _checked(values: dict[int, Any]) -> tuple[str, int, Any, int]:
    """Device, ts_ns, source and seq of head ``values``, checked as ``decode`` does."""
    code = values.get(_N["source"], 0)
    source = _sources().get(code)
    if source is None:
        raise fr.FrameDecodeError(f"unknown source code {code}" if code else "source missing")
    ts_ns = signed64(values.get(_N["ts_ns"], 0))
    if ts_ns < 0:
        raise fr.FrameDecodeError(f"ts_ns {ts_ns} is before the Unix epoch (a frame's time "
                                  "must be 0 <= ts_ns < 2**63 ns)")
    seq = values.get(_N["seq"], 0)
    if seq >= _STORE_LIMIT:
        raise fr.FrameDecodeError(f"seq {seq} does not fit the store's signed 64-bit column "
                                  "(it must be below 2**63)")
    return values.get(_N["device"], ""), ts_ns, source, seq


def decode(data: bytes | bytearray | memoryview,
           tables: EntityTables | None = None) -> fr.Frame:
    """The frame of one record; FrameDecodeError names any defect (see the module docstring).

    With ``tables``, a frame whose entity table equals the one its device sent last
    shares that tuple (and its checks are not repeated); see ``EntityTables``."""
    buf = as_bytes(data)
    if tables is None:
        return _decode(buf, None)[0]
    head = _head(buf)
    again = tables.recall(buf, head)
    if again is not None:
        return again
    frame, repeated = _decode(buf, tables)
    if repeated:  # a table sent twice is worth remembering
        tables.remember(buf, head, frame)
    return frame


def _decode(buf: bytes, tables: EntityTables | None) -> tuple[fr.Frame, bool]:
    """The frame, and whether ``tables`` knew its entity table."""
    try:
        fields = scan(buf, _KINDS)
    except WireError as exc:
        raise fr.FrameDecodeError(f"not a {SCHEMA} record: {exc}") from None
    n = fields.get(_N["n_samples"], 0)
    device, ts_ns, source, seq = _checked(fields)
    idx = column(fields.get(_N["entity_idx"]), Kind.FIXED32S)
    metric = column(fields.get(_N["metric"]), Kind.FIXED32S)
    raw = column(fields.get(_N["raw"]), Kind.FIXED64S)
    if not len(idx) == len(metric) == len(raw) == n:
        raise fr.FrameDecodeError(
            f"n_samples is {n} but the columns hold {len(idx)} entity indices, {len(metric)} "
            f"metric ids and {len(raw)} values (a record cut short?)")
    if n and int(metric.max()) > 0xFFFF:
        bad = int(np.flatnonzero(metric > 0xFFFF)[0])
        raise fr.FrameDecodeError(f"sample #{bad} has metric id {int(metric[bad])}, past "
                                  "65535")
    entities = tuple(fields.get(_N["entities"], ()))
    metric16 = metric.astype(np.uint16)
    known = None if tables is None else tables.known(device, entities)
    if known is not None:
        problem = frame_codec.index_problem(idx, len(known))
        if problem:
            raise fr.FrameDecodeError(f"frame of device {device!r}: {problem}")
        for arr in (idx, metric16, raw):
            arr.flags.writeable = False
        return fr.Frame.trusted(device, ts_ns, source, seq, known, idx, metric16, raw), True
    try:
        frame = fr.Frame(device, ts_ns, source, seq, entities, idx, metric16, raw)
    except fr.FrameError as exc:
        raise fr.FrameDecodeError(str(exc)) from None
    if tables is not None:
        tables.keep(device, frame.entities)
    return frame, False


from fabricops.core import frame as fr  # noqa: E402  (last: see the module docstring)
from fabricops.core import frame_codec  # noqa: E402
