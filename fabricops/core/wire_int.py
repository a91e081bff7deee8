"""IntBatch on the wire: message ``fabricops.intreport.v2.IntBatch``, on NumPy arrays.

``encode`` writes exactly the bytes protobuf's own serializer writes for the
same message: the counts, then every column as a packed fixed-width array,
in field-number order (``fixed64`` for the 64-bit columns, ``fixed32`` for
the others). ``decode`` reads any valid encoding of the message (see
:mod:`fabricops.core.wire_columns`) and checks, before anything is narrowed
to its column's width: every column holds ``n_reports`` or ``n_hops``
values, no value is wider than its field (``sport`` within 16 bits, ...), and
the hop counts add up to ``n_hops``; then ``IntBatch`` checks the ranges the
store needs (``RANGE_REASONS``). Any defect raises ``IntDecodeError``.

The column names, numbers and types are read from the schema at import; a
schema that no longer fits ``IntBatch`` fails the import with ``SchemaError``.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
from google.protobuf.descriptor import FieldDescriptor

from fabricops.core import wire_schema
from fabricops.core.intreport import (
    HOP_COLUMNS,
    REPORT_COLUMNS,
    SCHEMA,
    IntBatch,
    IntBatchError,
    IntDecodeError,
)
from fabricops.core.wire_columns import (
    WT_LEN,
    WT_VARINT,
    Kind,
    WireError,
    as_bytes,
    column,
    key,
    packed,
    scan,
    varint,
)

_FD = FieldDescriptor


class _Column:
    """One column of the schema: where it is, how it is read, what bounds it."""

    def __init__(self, field: FieldDescriptor, dtype: str, per_hop: bool) -> None:
        self.name, self.number, self.per_hop = field.name, field.number, per_hop
        self.dtype = np.dtype(dtype)
        wide = self.dtype.itemsize == 8
        self.kind = Kind.FIXED64S if wide else Kind.FIXED32S
        want = _FD.TYPE_FIXED64 if wide else _FD.TYPE_FIXED32
        if field.type != want or not field.is_repeated:
            raise wire_schema.SchemaError(f"{SCHEMA}.{self.name} is not the repeated field "
                                          f"type {want} the INT codec writes")
        self.tag = key(self.number, WT_LEN)
        self.wire = np.dtype("<u8" if wide else "<u4")
        self.limit = (1 << 8 * self.dtype.itemsize) - 1


def _columns() -> tuple[dict[str, int], list[_Column]]:
    message = wire_schema.message_descriptor(SCHEMA)
    fields = message.fields_by_name
    counts = {}
    for name in ("n_reports", "n_hops"):
        if name not in fields or fields[name].type != _FD.TYPE_UINT32:
            raise wire_schema.SchemaError(f"{SCHEMA}.{name} is not a uint32 field")
        counts[name] = fields[name].number
    wanted = [(n, dt, False) for n, dt in REPORT_COLUMNS if n != "hop_start"]
    wanted += [(n, dt, True) for n, dt, _ in HOP_COLUMNS]
    missing = sorted({n for n, _, _ in wanted} - set(fields))
    extra = sorted(set(fields) - {n for n, _, _ in wanted} - set(counts))
    if missing or extra:
        raise wire_schema.SchemaError(f"{SCHEMA} does not have the IntBatch columns: missing "
                                      f"{missing}, not columns {extra}")
    cols = [_Column(fields[n], dt, per_hop) for n, dt, per_hop in wanted]
    return counts, sorted(cols, key=lambda c: c.number)


_COUNTS, _COLUMNS = _columns()
_KINDS: Final = {c.number: c.kind for c in _COLUMNS} | dict.fromkeys(_COUNTS.values(), Kind.VARINT)
_COUNT_TAGS: Final = {name: key(number, WT_VARINT) for name, number in _COUNTS.items()}


def encode(batch: IntBatch) -> bytes:
    """The record of ``batch``."""
    parts: list[bytes] = []
    for name, n in (("n_reports", batch.n_reports), ("n_hops", batch.n_hops)):
        if n:
            parts += (_COUNT_TAGS[name], varint(n))
    for col in _COLUMNS:
        parts += packed(col.tag, getattr(batch, col.name), col.wire)
    return b"".join(parts)


def decode(data: bytes | bytearray | memoryview) -> IntBatch:
    """The batch of one record; IntDecodeError names any defect (see the module docstring)."""
    try:
        fields = scan(as_bytes(data), _KINDS)
    except WireError as exc:
        raise IntDecodeError(f"not a {SCHEMA} record: {exc}") from None
    n_rep = fields.get(_COUNTS["n_reports"], 0)
    n_hop = fields.get(_COUNTS["n_hops"], 0)
    cols: dict[str, Any] = {}
    for col in _COLUMNS:
        arr = column(fields.get(col.number), col.kind)
        want, unit = (n_hop, "n_hops") if col.per_hop else (n_rep, "n_reports")
        if len(arr) != want:
            raise IntDecodeError(f"INT batch column {col.name} holds {len(arr)} values but "
                                 f"{unit} is {want} (a record cut short?)")
        if want and col.limit < 0xFFFFFFFF and int(arr.max()) > col.limit:
            bad = int(np.flatnonzero(arr > col.limit)[0])
            raise IntDecodeError(f"INT batch column {col.name} holds {int(arr[bad])} at "
                                 f"{'hop' if col.per_hop else 'report'} #{bad}, wider than "
                                 f"its {8 * col.dtype.itemsize} bits")
        cols[col.name] = arr
    total = int(cols["hop_count"].sum(dtype=np.int64))
    if total != n_hop:
        raise IntDecodeError(f"INT batch hop counts sum to {total}, but it holds {n_hop} hops")
    try:
        return IntBatch.from_columns(cols)
    except IntBatchError as exc:
        raise IntDecodeError(str(exc)) from None


__all__ = ["SCHEMA", "decode", "encode"]
