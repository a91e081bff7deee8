"""Queries over the store: any series over any range, latest values, events.

A series is read back from the keyframe segments that overlap the range: the
store answers up to the newest written window (a window is written a few
seconds after it ends; live values travel on the bus). Counters come back
exact (u64) or as per-second rates; gauges within the bound their segment
states; states exact. A series collected by several
sources (SNMP and gNMI both report port counters) is read from one: the one
asked for, else the one with the most points in the range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fabricops.core.catalogue import CATALOGUE, MetricKind
from fabricops.core.entities import PORT_SEP
from fabricops.pipeline.keyframe import SeriesBlock, decode_block
from fabricops.store.store import Store

_TOP_HALF = np.uint64(1 << 63)


class QueryError(ValueError):
    """A query that cannot be answered as asked; the message names what is wrong."""


@dataclass(frozen=True)
class SeriesData:
    """One series over a range: ``values`` are u64 (counters, states) or float64."""

    entity: str
    metric: str
    kind: MetricKind
    source: str | None
    ts_ns: NDArray[np.int64]
    values: NDArray[np.uint64] | NDArray[np.float64]
    max_error: float = 0.0


def device_of(entity: str) -> str:
    """The device that reports an entity (``leaf-1:eth3`` -> ``leaf-1``)."""
    return entity.split(PORT_SEP, 1)[0]


def read_series(store: Store, *, entity: str, metric: str, t0_ns: int, t1_ns: int,
                rate: bool = False, source: str | None = None) -> SeriesData:
    """The series in ``[t0_ns, t1_ns]``; ``rate`` turns a counter into per-second rates."""
    try:
        m = CATALOGUE.by_name(metric)
    except KeyError as exc:
        raise QueryError(f"unknown metric {metric!r}: {exc}") from exc
    if t1_ns < t0_ns:
        raise QueryError(f"empty range: t1 {t1_ns} is before t0 {t0_ns}")
    if rate and m.kind is not MetricKind.COUNTER:
        raise QueryError(f"{metric} is a {m.kind.value}; only counters have rates")
    by_source = _points(store, device_of(entity), entity, m.id, t0_ns, t1_ns, source)
    if not by_source:
        empty: NDArray[np.uint64] | NDArray[np.float64] = (
            np.zeros(0, np.float64) if rate or m.kind is MetricKind.GAUGE
            else np.zeros(0, np.uint64))
        return SeriesData(entity, metric, m.kind, source, np.zeros(0, np.int64), empty)
    chosen = source or max(by_source, key=lambda s: len(by_source[s][0]))
    ts, raw, err = by_source[chosen]
    values: NDArray[np.uint64] | NDArray[np.float64] = raw
    if m.kind is MetricKind.GAUGE:
        values = raw.view(np.float64)
    if rate:
        ts, values = ts[1:], series_rates(ts, raw)
    return SeriesData(entity, metric, m.kind, chosen, ts, values, err)


def series_rates(ts_ns: NDArray[np.int64], raw: NDArray[np.uint64]) -> NDArray[np.float64]:
    """Per-second rates between consecutive samples; a wrap at 2**64 counts, a drop is NaN."""
    if len(raw) < 2:
        return np.zeros(0)
    prev, cur = raw[:-1], raw[1:]
    dt_s = np.diff(ts_ns) / 1e9
    down = cur < prev
    wrapped = down & (prev >= _TOP_HALF) & (cur < _TOP_HALF)
    rate = (cur - prev).astype(np.float64) / dt_s
    rate[down & ~wrapped] = np.nan
    return rate


def _points(store: Store, device: str, entity: str, metric_id: int, t0_ns: int, t1_ns: int,
            source: str | None) -> dict[str, tuple[NDArray[np.int64], NDArray[np.uint64], float]]:
    parts: dict[str, list[tuple[NDArray[np.int64], NDArray[np.uint64]]]] = {}
    error: dict[str, float] = {}
    for seg in store.segments(t0_ns=t0_ns, t1_ns=t1_ns, devices=[device], source=source):
        got = _pick(decode_block(seg.payload), entity, metric_id, t0_ns, t1_ns)
        if got is not None:
            parts.setdefault(seg.source, []).append(got)
            error[seg.source] = max(error.get(seg.source, 0.0), seg.max_error)
    out = {}
    for src, chunks in parts.items():
        ts = np.concatenate([c[0] for c in chunks])
        raw = np.concatenate([c[1] for c in chunks])
        order = np.argsort(ts, kind="stable")
        ts, raw = ts[order], raw[order]
        keep = np.concatenate([[True], np.diff(ts) > 0])
        out[src] = (ts[keep], raw[keep], error.get(src, 0.0))
    return out


def _pick(block: SeriesBlock, entity: str, metric_id: int, t0_ns: int,
          t1_ns: int) -> tuple[NDArray[np.int64], NDArray[np.uint64]] | None:
    rows = np.flatnonzero((block.metric == metric_id)
                          & (np.asarray(block.entity, dtype=object) == entity))
    if rows.size == 0:
        return None
    row = int(rows[0])
    keep = block.present[row] & (block.ts_ns >= t0_ns) & (block.ts_ns <= t1_ns)
    if not keep.any():
        return None
    return block.ts_ns[keep], block.raw[row][keep]


@dataclass(frozen=True)
class Latest:
    entity: str
    metric: str
    ts_ns: int
    value: float | int


def latest(store: Store, *, entities: Sequence[str], metrics: Sequence[str],
           lookback_s: float, now_ns: int) -> list[Latest]:
    """The newest value of each (entity, metric) within ``lookback_s`` before ``now_ns``."""
    out = []
    for entity in entities:
        for metric in metrics:
            data = read_series(store, entity=entity, metric=metric,
                               t0_ns=now_ns - round(lookback_s * 1e9), t1_ns=now_ns)
            if len(data.ts_ns):
                v = data.values[-1]
                out.append(Latest(entity, metric, int(data.ts_ns[-1]),
                                  float(v) if data.kind is MetricKind.GAUGE else int(v)))
    return out
