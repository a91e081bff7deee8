"""The series block the kf1 codec encodes, how one is cut from frames, and the
default error bounds of its gauges.

``block_from_frames`` turns the frames of one device and source over a window
(any order) into a ``SeriesBlock``: points sorted by time, one series per
(entity, metric) seen in any frame, in order of first appearance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from fabricops.core.catalogue import CATALOGUE, Catalogue, MetricKind
from fabricops.core.frame import Frame
from fabricops.core.frame_join import join_frames
from fabricops.pipeline.keyframe_pack import KeyframeError

MAX_POINTS: Final = 1 << 20
MAX_SAMPLES: Final = 1 << 26


@dataclass(frozen=True, eq=False)
class SeriesBlock:
    """One device's series from one source over one window (a keyframe interval).

    ``ts_ns`` (n_points,) int64, strictly increasing, ns since the epoch; ``entity``
    and ``metric`` (n_series,) name each series; ``raw`` (n_series, n_points) uint64
    holds counters and states exactly and gauges as float64 bits; ``present`` is
    False where a frame lacked the series. Arrays are kept as read-only views.
    """

    ts_ns: NDArray[np.int64]
    entity: tuple[str, ...]
    metric: NDArray[np.uint16]
    raw: NDArray[np.uint64]
    present: NDArray[np.bool_]

    def __post_init__(self) -> None:
        problem = _block_problem(self)
        if problem:
            raise KeyframeError(f"series block: {problem}")
        put = object.__setattr__
        put(self, "entity", tuple(self.entity))
        for name in ("ts_ns", "metric", "raw", "present"):
            view = getattr(self, name).view()
            view.flags.writeable = False
            put(self, name, view)

    @property
    def n_series(self) -> int:
        return len(self.metric)

    @property
    def n_points(self) -> int:
        return len(self.ts_ns)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SeriesBlock):
            return NotImplemented
        return self.entity == other.entity and all(
            np.array_equal(getattr(self, k), getattr(other, k))
            for k in ("ts_ns", "metric", "raw", "present"))

    __hash__ = None  # type: ignore[assignment]


def _array_problem(name: str, arr: Any, dtype: type, ndim: int) -> str | None:
    if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.ndim != ndim:
        got = f"{arr.dtype}[{arr.ndim}d]" if isinstance(arr, np.ndarray) else type(arr).__name__
        return f"{name} must be a {ndim}-d {np.dtype(dtype).name} array, got {got}"
    return None


def _block_problem(b: SeriesBlock) -> str | None:
    problem = (_array_problem("ts_ns", b.ts_ns, np.int64, 1)
               or _array_problem("metric", b.metric, np.uint16, 1)
               or _array_problem("raw", b.raw, np.uint64, 2)
               or _array_problem("present", b.present, np.bool_, 2))
    if problem:
        return problem
    n_series, n_points = len(b.metric), len(b.ts_ns)
    if not 1 <= n_points <= MAX_POINTS or n_series * n_points > MAX_SAMPLES:
        return (f"{n_series} series x {n_points} points: need 1..{MAX_POINTS} points and "
                f"at most {MAX_SAMPLES} samples")
    if (np.diff(b.ts_ns) <= 0).any():
        return "ts_ns is not strictly increasing"
    if len(b.entity) != n_series or not set(map(type, b.entity)) <= {str}:
        return f"entity must be {n_series} strings (one per metric), got {len(b.entity)}"
    for name in ("raw", "present"):
        shape = getattr(b, name).shape
        if shape != (n_series, n_points):
            return f"{name} has shape {shape}, expected {(n_series, n_points)}"
    return None


def block_from_frames(frames: Sequence[Frame]) -> SeriesBlock:
    """The block of ``frames`` (one device and source, any order).

    Frames are sorted by ``ts_ns``; frames sharing a timestamp are the parts of one
    instant, joined (``join_frames``); of samples repeating an (entity, metric) in
    an instant, the first is kept. A series a frame lacks is absent there
    (``present`` False, raw 0).
    """
    kept = _instants(frames)
    names: dict[str, int] = {}
    if all(_same_layout(b, a) for a, b in pairwise(kept)):  # one layout
        keys = _sample_keys(kept[0], names)
        if len(np.unique(keys)) == len(keys):  # and no sample repeated: the usual block
            raw = np.concatenate([f.raw for f in kept]).reshape(len(kept), len(keys))
            return _block(kept, names, keys, np.ascontiguousarray(raw.T),
                          np.ones((len(keys), len(kept)), bool))
    layouts: list[tuple[NDArray[np.int64], list[int]]] = []  # sample keys, frames
    prev: Frame | None = None
    for t, frame in enumerate(kept):
        if prev is None or not _same_layout(frame, prev):
            layouts.append((_sample_keys(frame, names), []))
        layouts[-1][1].append(t)
        prev = frame
    uniq, first = np.unique(np.concatenate([k for k, _ in layouts]), return_index=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), np.int64)
    rank[order] = np.arange(len(uniq))
    raw = np.zeros((len(uniq), len(kept)), np.uint64)
    present = np.zeros(raw.shape, bool)
    for k, cols in layouts:
        fk, fi = np.unique(k, return_index=True)
        rows = rank[np.searchsorted(uniq, fk)][:, None]
        at = np.array(cols, np.int64)[None, :]
        raw[rows, at] = np.stack([kept[t].raw for t in cols], axis=1)[fi]
        present[rows, at] = True
    return _block(kept, names, uniq[order], raw, present)


def _block(kept: list[Frame], names: dict[str, int], series: NDArray[np.int64],
           raw: NDArray[np.uint64], present: NDArray[np.bool_]) -> SeriesBlock:
    """The block of ``kept`` frames whose series (``entity number << 16 | metric id``,
    entities numbered in ``names``) hold ``raw``, where ``present``."""
    table = list(names)
    entity = tuple(table[i] for i in (series >> 16).tolist())
    ts = np.array([f.ts_ns for f in kept], np.int64)
    return SeriesBlock(ts, entity, (series & 0xFFFF).astype(np.uint16), raw, present)


def _same_layout(a: Frame, b: Frame) -> bool:
    """The same entities and (entity, metric) of each sample, in the same order."""
    return (a.entities is b.entities or a.entities == b.entities) and (
        a.entity_idx is b.entity_idx or np.array_equal(a.entity_idx, b.entity_idx)) and (
        a.metric is b.metric or np.array_equal(a.metric, b.metric))


def _instants(frames: Sequence[Frame]) -> list[Frame]:
    """``frames`` in time order, those sharing a time joined (the first keeps a sample
    they repeat)."""
    if not frames:
        raise KeyframeError("no frames to build a block from")
    device, source = frames[0].device, frames[0].source
    for f in frames:
        if (f.device, f.source) != (device, source):
            raise KeyframeError(f"frames of {device!r}/{source} and {f.device!r}/{f.source} "
                                "mixed: a block holds one device and source")
    ts = np.array([f.ts_ns for f in frames], np.int64)
    order = np.argsort(ts, kind="stable")
    _, first = np.unique(ts[order], return_index=True)
    if len(first) == len(frames):
        return [frames[i] for i in order.tolist()]
    ends = np.append(first[1:], len(frames)).tolist()
    return [join_frames([frames[i] for i in order[a:b].tolist()], later_wins=False).frame
            for a, b in zip(first.tolist(), ends, strict=True)]


def _sample_keys(frame: Frame, names: dict[str, int]) -> NDArray[np.int64]:
    """Per sample ``entity number << 16 | metric id``, numbering new entities in ``names``."""
    table = np.array([names.setdefault(e, len(names)) for e in frame.entities], np.int64)
    gid = table[frame.entity_idx] if len(table) else np.zeros(0, np.int64)
    keys: NDArray[np.int64] = (gid << 16) | frame.metric.astype(np.int64)
    return keys


BOUND_BY_UNIT: Final = {
    "bytes": 8.0, "cells": 0.5, "ns": 0.5, "ratio": 1e-3, "dBm": 0.01, "celsius": 0.1,
    "bits/s": 1e6, "mA": 0.01, "V": 1e-3, "rpm": 0.5, "W": 0.01,
}
"""Default absolute gauge bound per catalogue unit: below what an operator reads on
that unit (a queue byte count far under one buffer cell; 0.5 keeps integer cells
and ns exact; utilization to 0.1 %; optics to 0.01 dBm; 0.1 C; rates to 1 Mb/s;
laser bias to 0.01 mA; supply voltage to 1 mV; 0.5 keeps integer fan rpm exact;
power to 0.01 W)."""


def default_gauge_bound(metric_id: int, catalogue: Catalogue = CATALOGUE) -> float:
    """The default bound of a metric: by its unit for gauges, 0 (exact) otherwise.

    UnknownMetricError if the catalogue does not define ``metric_id``."""
    metric = catalogue.by_id(metric_id)
    if metric.kind is not MetricKind.GAUGE:
        return 0.0
    return BOUND_BY_UNIT.get(metric.family.unit, 0.0)


@lru_cache(maxsize=4)
def _bound_table(catalogue: Catalogue) -> NDArray[np.float64]:
    table = np.zeros(catalogue.max_id + 1)
    for m in catalogue.metrics:
        table[m.id] = default_gauge_bound(m.id, catalogue)
    table.flags.writeable = False
    return table


def gauge_bounds(metric_ids: NDArray[np.integer[Any]] | Sequence[int],
                 catalogue: Catalogue = CATALOGUE) -> NDArray[np.float64]:
    """``default_gauge_bound`` of each id, for ``encode_block``; KeyframeError if unknown."""
    ids = np.asarray(metric_ids, dtype=np.int64)
    table = _bound_table(catalogue)
    known = (ids >= 0) & (ids < len(table))
    known[known] = catalogue.is_known[ids[known]]
    if not known.all():
        raise KeyframeError(f"metric id {ids[~known][0]} is not in the catalogue")
    return table[ids]
