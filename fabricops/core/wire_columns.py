"""Protocol Buffers encoding for columnar records, on NumPy arrays.

The frame and INT schemas hold their columns as packed fixed-width repeated
fields (``repeated fixed32`` / ``repeated fixed64``): on the wire a tag, a
length and the column's little-endian bytes. So a column is written with
``tobytes`` and read with ``np.frombuffer``, and the record is still plain
protobuf that any generated decoder reads.

``scan`` reads a message the way protobuf parsers do: fields in any order,
the last value of a singular field wins, repeated fields concatenate (packed
chunks and single unpacked values alike), unknown fields are skipped by
their wire type (groups too). It refuses, with ``WireError`` naming the
field and the offset: a varint or field cut short, a length past the end, a
varint past 64 bits, field number 0, wire type 6 or 7, an unmatched group
end, and a known field of the wrong wire type (which protobuf's parsers
would keep as an unknown field: here it means the record is not the schema's).

Column arrays are read-only views of an immutable copy of the input (no copy
when the input is ``bytes``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

WT_VARINT, WT_I64, WT_LEN, WT_SGROUP, WT_EGROUP, WT_I32 = 0, 1, 2, 3, 4, 5
_MASK64: Final = (1 << 64) - 1
_MAX_DEPTH: Final = 100
_ONE_BYTE: Final = tuple(bytes((i,)) for i in range(128))


class Kind:
    """How ``scan`` keeps a field's values (plain ints: ``scan`` compares them per field)."""

    VARINT: Final = 0  # int, the last one wins
    STRING: Final = 1  # str (UTF-8), the last one wins
    STRINGS: Final = 2  # list[str]
    FIXED32S: Final = 3  # uint32 array
    FIXED64S: Final = 4  # uint64 array


# kind -> (value size, wire type of one unpacked value, wire dtype, native dtype)
_FIXED: Final[dict[int, tuple[int, int, np.dtype[Any], np.dtype[Any]]]] = {
    Kind.FIXED32S: (4, WT_I32, np.dtype("<u4"), np.dtype(np.uint32)),
    Kind.FIXED64S: (8, WT_I64, np.dtype("<u8"), np.dtype(np.uint64)),
}
_LITTLE: Final = sys.byteorder == "little"  # the wire's order: arrays need no byte swap
_VARINT, _STRING, _STRINGS = Kind.VARINT, Kind.STRING, Kind.STRINGS


class WireError(ValueError):
    """Bytes that are not a valid message of the schema; names the field and offset."""


def varint(value: int) -> bytes:
    """The base-128 varint of ``value`` (0 <= value < 2**64; negatives as two's complement)."""
    value &= _MASK64
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(number: int, wire_type: int) -> bytes:
    """The field key (tag) of field ``number`` with ``wire_type``."""
    return varint(number << 3 | wire_type)


def packed(tag: bytes, array: NDArray[Any], wire: np.dtype[Any]) -> list[bytes]:
    """A packed repeated field of ``array`` cast to ``wire``; nothing for an empty array."""
    if not len(array):
        return []
    data = array.astype(wire, copy=False).tobytes()
    return [tag, varint(len(data)), data]


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``; WireError if cut or too long."""
    if pos + 1 < len(buf):
        low, high = buf[pos], buf[pos + 1]
        if low < 0x80:
            return low, pos + 1
        if high < 0x80:
            return low & 0x7F | high << 7, pos + 2
    result = shift = 0
    start, end = pos, len(buf)
    while True:
        if pos >= end:
            raise WireError(f"truncated varint at offset {start} (the record is {end} bytes)")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > _MASK64:
                raise WireError(f"varint at offset {start} does not fit 64 bits")
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError(f"varint at offset {start} is longer than 10 bytes")


def signed64(value: int) -> int:
    """An ``int64`` field's value from its varint (two's complement)."""
    return value - (1 << 64) if value >> 63 else value


def as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    """``data`` as immutable bytes (a copy unless it is ``bytes`` already)."""
    return data if type(data) is bytes else bytes(memoryview(data).cast("B"))


def scan(buf: bytes, kinds: Mapping[int, int]) -> dict[int, Any]:
    """Values of the fields in ``kinds`` (number -> ``Kind``) by number; others skipped.

    See the module docstring. Fixed-width fields come back as lists of arrays (one per
    chunk, see ``column``).
    """
    out: dict[int, Any] = {}
    pos, end = 0, len(buf)
    try:
        while pos < end:
            start = pos
            tag = buf[pos]
            if tag < 0x80:
                pos += 1
            else:
                tag, pos = read_varint(buf, pos)
            number, wt = tag >> 3, tag & 7
            kind = kinds.get(number, -1)
            if kind == _STRINGS:
                pos = _strings(buf, pos, wt, number, start, out.setdefault(number, []))
            elif kind == _VARINT:
                if wt != WT_VARINT:
                    _wrong_type(wt, WT_VARINT, number, start)
                out[number], pos = read_varint(buf, pos)
            elif kind == _STRING:
                if wt != WT_LEN:
                    _wrong_type(wt, WT_LEN, number, start)
                pos, stop = _length(buf, pos, number)
                out[number] = buf[pos:stop].decode()
                pos = stop
            elif kind >= 0:
                pos = _fixed(buf, pos, wt, number, start, kind, out)
            elif number == 0:
                raise WireError(f"field number 0 at offset {start}")
            else:
                pos = skip(buf, pos, wt, number)
    except UnicodeDecodeError as exc:
        raise WireError(f"a string field before offset {pos} is not UTF-8: "
                        f"{exc.reason}") from None
    return out


def _strings(buf: bytes, pos: int, wt: int, number: int, start: int, into: list[str]) -> int:
    """Read one value of repeated string field ``number`` and the values of the same
    field that directly follow it (one-byte key and length: the common run)."""
    if wt != WT_LEN:
        _wrong_type(wt, WT_LEN, number, start)
    pos, stop = _length(buf, pos, number)
    append = into.append
    append(buf[pos:stop].decode())
    pos, end, tag = stop, len(buf), buf[start]
    while tag < 0x80 and pos + 1 < end and buf[pos] == tag:
        n = buf[pos + 1]
        stop = pos + 2 + n
        if n >= 0x80 or stop > end:
            break
        append(buf[pos + 2:stop].decode())
        pos = stop
    return pos


def column(chunks: list[NDArray[Any]] | None, kind: int) -> NDArray[Any]:
    """One array of a fixed-width field's chunks (empty if it was absent)."""
    if not chunks:
        return np.zeros(0, _FIXED[kind][3])
    return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)


def skip(buf: bytes, pos: int, wt: int, number: int, depth: int = 0) -> int:
    """Position after the value of an unknown field ``number`` of wire type ``wt``.

    Groups nest at most ``_MAX_DEPTH`` deep, as in protobuf's parsers.
    """
    if wt == WT_VARINT:
        return read_varint(buf, pos)[1]
    if wt == WT_LEN:
        return _length(buf, pos, number)[1]
    if wt in (WT_I64, WT_I32):
        stop = pos + (8 if wt == WT_I64 else 4)
        if stop > len(buf):
            raise WireError(f"field {number} at offset {pos} runs past the end of the record")
        return stop
    if wt == WT_SGROUP:
        if depth >= _MAX_DEPTH:
            raise WireError(f"groups nest more than {_MAX_DEPTH} deep at offset {pos}")
        while True:
            if pos >= len(buf):
                raise WireError(f"group {number} is not closed before the end of the record")
            tag, pos = read_varint(buf, pos)
            if tag & 7 == WT_EGROUP:
                if tag >> 3 != number:
                    raise WireError(f"group {number} closed by the end of group {tag >> 3}")
                return pos
            pos = skip(buf, pos, tag & 7, tag >> 3, depth + 1)
    raise WireError(f"field {number} before offset {pos} has invalid wire type {wt}")


def _wrong_type(wt: int, want: int, number: int, offset: int) -> None:
    raise WireError(f"field {number} at offset {offset} has wire type {wt}, expected {want}")


def _length(buf: bytes, pos: int, number: int) -> tuple[int, int]:
    """(start, stop) of a length-delimited value whose length varint is at ``pos``."""
    if pos < len(buf) and buf[pos] < 0x80:
        n = buf[pos]
        pos += 1
    else:
        n, pos = read_varint(buf, pos)
    if pos + n > len(buf):
        raise WireError(f"field {number}: length {n} at offset {pos} runs past the end of the "
                        f"record ({len(buf)} bytes)")
    return pos, pos + n


def _fixed(buf: bytes, pos: int, wt: int, number: int, start: int, kind: int,
           out: dict[int, Any]) -> int:
    """Read one packed chunk or one unpacked value of a fixed-width field into ``out``."""
    size, single_wt, wire, native = _FIXED[kind]
    if wt == WT_LEN:
        pos, stop = _length(buf, pos, number)
        if (stop - pos) % size:
            raise WireError(f"field {number} at offset {start}: packed length {stop - pos} is "
                            f"not a multiple of {size}")
    elif wt == single_wt:
        stop = pos + size
        if stop > len(buf):
            raise WireError(f"field {number} at offset {start} runs past the end of the record")
    else:
        raise WireError(f"field {number} at offset {start} has wire type {wt}, expected "
                        f"{WT_LEN} (packed) or {single_wt}")
    arr = np.frombuffer(buf, wire, (stop - pos) // size, pos)
    out.setdefault(number, []).append(arr if _LITTLE else arr.astype(native))
    return stop


__all__ = ["WT_I32", "WT_I64", "WT_LEN", "WT_VARINT", "Kind", "WireError", "as_bytes", "column",
           "key", "packed", "read_varint", "scan", "signed64", "skip", "varint"]
