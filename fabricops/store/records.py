"""What the store keeps, as plain frozen records (one per table row).

Times are ns since the Unix epoch; sequence numbers must fit a signed 64-bit
column (below 2**63). ``source`` is a :class:`fabricops.core.frame.Source`
value (the store returns plain strings, which compare equal to it).
``store_problem`` says why a record (or a frame to stage, or an event) does not
fit its table's columns, before any SQL runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Union

from fabricops.core.records import Event

if TYPE_CHECKING:  # frames are checked where they are decoded; a listing needs no NumPy
    from fabricops.core.frame import Frame

HOP_SEPARATOR: Final = ">"
PORT_SEPARATOR: Final = ":"
I64_MAX: Final = 2**63 - 1


@dataclass(frozen=True)
class SeriesRecord:
    """A series: catalogue ``metric`` (name) of ``kind`` measured on ``entity``."""

    device: str
    entity: str
    metric: str
    kind: str


@dataclass(frozen=True)
class SegmentRecord:
    """A closed window of one device's frames from one source, compressed.

    It covers samples ``t_start_ns .. t_end_ns`` (inclusive) and frames
    ``first_seq .. last_seq``; ``payload`` is the codec's bytes, ``encoding``
    names the codec and version, ``max_error`` is the largest error bound of
    its gauges (0 for lossless).
    """

    device: str
    source: str
    t_start_ns: int
    t_end_ns: int
    first_seq: int
    last_seq: int
    n_points: int
    n_series: int
    encoding: str
    max_error: float
    payload: bytes


@dataclass(frozen=True)
class SegmentHead:
    """A stored segment without its payload: what a merge plans with."""

    device: str
    source: str
    t_start_ns: int
    t_end_ns: int
    first_seq: int
    n_points: int
    n_series: int


@dataclass(frozen=True)
class SegmentMerge:
    """Segments ``old`` of one stream (in time order) to be replaced by ``new``, which
    holds their points."""

    old: tuple[SegmentRecord, ...]
    new: SegmentRecord


@dataclass(frozen=True)
class WindowClose:
    """One window of a (device, source) stream written as ``segments``: the segments
    starting in ``window`` (t0_ns, t1_ns; None: none) are replaced, and ``state``,
    if given, is saved as the stream's checkpoint at ``before_ts_ns`` (it covers
    every frame before it)."""

    device: str
    source: str
    window: tuple[int, int] | None
    segments: Sequence[SegmentRecord]
    before_ts_ns: int
    state: bytes | None = None


@dataclass(frozen=True)
class IntPathRecord:
    """One flow seen on one path in INT reports from ``first_ts_ns`` to ``last_ts_ns``.

    The flow is the 5-tuple (IP addresses as text). ``path`` is the hops in
    path order, each ``switch`` or ``switch:port``, joined by ``>`` (see
    ``join_path``). ``n_reports`` reports were seen; the largest hop latency
    among them was ``max_hop_latency_ns``.
    """

    src_ip: str
    dst_ip: str
    sport: int
    dport: int
    proto: int
    sink: str
    path: str
    first_ts_ns: int
    last_ts_ns: int
    n_reports: int
    max_hop_latency_ns: int

    @property
    def flow_path(self) -> tuple[str, str, int, int, int, str]:
        """The row's identity: flow 5-tuple and path."""
        return (self.src_ip, self.dst_ip, self.sport, self.dport, self.proto, self.path)


def join_path(hops: Sequence[tuple[str, str | None]]) -> str:
    """The ``path`` text of hops ``(switch, egress port or None)``, in path order."""
    return HOP_SEPARATOR.join(s if p is None else f"{s}{PORT_SEPARATOR}{p}" for s, p in hops)


def path_switches(path: str) -> list[str]:
    """The switches a ``path`` text crosses, in path order."""
    return [hop.split(PORT_SEPARATOR, 1)[0] for hop in path.split(HOP_SEPARATOR)] if path else []


def merge_int_paths(records: Sequence[IntPathRecord]) -> list[IntPathRecord]:
    """One record per (flow, path), combining the ones in ``records`` (first seen order).

    Combined as the store combines a record with its row: ``n_reports`` added
    when the time windows are disjoint, else the larger kept (a re-delivery).
    """
    merged: dict[tuple[str, str, int, int, int, str], IntPathRecord] = {}
    for rec in records:
        old = merged.get(rec.flow_path)
        merged[rec.flow_path] = rec if old is None else combine_int_paths(old, rec)
    return list(merged.values())


def combine_int_paths(old: IntPathRecord, new: IntPathRecord) -> IntPathRecord:
    """``old`` updated with ``new`` of the same (flow, path)."""
    disjoint = new.first_ts_ns > old.last_ts_ns or new.last_ts_ns < old.first_ts_ns
    return IntPathRecord(
        *old.flow_path[:5], sink=new.sink if new.last_ts_ns > old.last_ts_ns else old.sink,
        path=old.path,
        first_ts_ns=min(old.first_ts_ns, new.first_ts_ns),
        last_ts_ns=max(old.last_ts_ns, new.last_ts_ns),
        n_reports=old.n_reports + new.n_reports if disjoint else max(old.n_reports,
                                                                     new.n_reports),
        max_hop_latency_ns=max(old.max_hop_latency_ns, new.max_hop_latency_ns))


_I32: Final = (-(2**31), 2**31 - 1)
_FROM_ZERO: Final = (0, I64_MAX)  # times, sequence numbers and counts
_NAME: Final = 255  # String(255): devices, entities, metrics, switches


@dataclass(frozen=True)
class _Columns:
    """A record's fields as the store's columns take them: integer bounds (inclusive),
    text lengths in characters (None: unbounded), and floats that must be finite."""

    ints: Mapping[str, tuple[int, int]]
    texts: Mapping[str, int | None]
    finite: tuple[str, ...] = ()


_COLUMNS: Final[dict[type, _Columns]] = {
    SeriesRecord: _Columns({}, {"device": _NAME, "entity": _NAME, "metric": _NAME, "kind": 16}),
    SegmentRecord: _Columns(
        dict.fromkeys(("t_start_ns", "t_end_ns", "first_seq", "last_seq", "n_points"),
                      _FROM_ZERO) | {"n_series": (0, _I32[1])},
        {"device": _NAME, "source": 16, "encoding": 64}, finite=("max_error",)),
    IntPathRecord: _Columns(
        dict.fromkeys(("sport", "dport", "proto"), _I32)
        | dict.fromkeys(("first_ts_ns", "last_ts_ns", "n_reports", "max_hop_latency_ns"),
                        _FROM_ZERO),
        {"src_ip": 45, "dst_ip": 45, "sink": _NAME, "path": None}),
    Event: _Columns({"ts_ns": _FROM_ZERO}, {"device": _NAME, "entity": _NAME, "metric": _NAME,
                                            "kind": 32, "severity": 16, "detail": None}),
}
_FRAME_COLUMNS: Final = _Columns({"ts_ns": _FROM_ZERO, "seq": _FROM_ZERO},
                                 {"device": _NAME, "source": 16})
_FRAME_NUMBERS: Final = _Columns(_FRAME_COLUMNS.ints, {})  # a frame whose names passed
StoredRecord = Union[SeriesRecord, SegmentRecord, IntPathRecord, Event, "Frame"]


def store_problem(record: StoredRecord, *, names: bool = True) -> str | None:
    """Why the store cannot keep ``record`` as it is, or None if it can.

    Integers must fit their column (signed 64-bit; times, sequence numbers and
    counts from 0; ports and protocol 32-bit), text its length, without NUL
    characters (PostgreSQL refuses them), and ``max_error`` must be finite. A
    frame (the source of segments, series and events) also needs entity names
    that fit a name column. With ``names=False`` (a frame of a device whose name
    and entity table passed before) only a frame's numbers are checked. Pure and
    cheap: call it before writing.
    """
    cols, frame = _COLUMNS.get(type(record)), None
    if cols is None:
        frame_class = _frame_class()
        if not isinstance(record, frame_class):
            raise TypeError(f"the store keeps no {type(record).__name__}")
        cols, frame = (_FRAME_COLUMNS if names else _FRAME_NUMBERS), record
    for name, (low, high) in cols.ints.items():
        value = getattr(record, name)
        if not isinstance(value, int) or not low <= value <= high:
            return f"{_label(record, name)} {value!r} is outside [{low}, {high}]"
    for name, limit in cols.texts.items():
        problem = _text_problem(getattr(record, name), limit)
        if problem:
            return f"{_label(record, name)} {problem}"
    for name in cols.finite:
        if not math.isfinite(getattr(record, name)):
            return f"{_label(record, name)} {getattr(record, name)!r} is not finite"
    if frame is not None and names:
        for i, entity in enumerate(frame.entities):
            problem = _text_problem(entity, _NAME)
            if problem:
                return f"frame of device {frame.device[:_NAME]!r}: entity #{i} {problem}"
    return None


def _frame_class() -> type[Frame]:
    from fabricops.core.frame import Frame

    return Frame


def fits_store(record: StoredRecord) -> bool:
    """True if the store can keep ``record`` (see ``store_problem``)."""
    return store_problem(record) is None


def _text_problem(value: str, limit: int | None) -> str | None:
    if limit is not None and len(value) > limit:
        return f"{value[:40]!r}... has {len(value)} characters, over {limit}"
    if "\x00" in value:
        return f"{value[:40]!r} holds a NUL character"
    return None


def _label(record: StoredRecord, name: str) -> str:
    return f"{type(record).__name__}.{name}"
