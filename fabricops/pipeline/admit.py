"""What of a decoded record the pipeline keeps: samples it can judge and store.

``admit_samples`` drops from a frame the samples of metrics the catalogue
does not know and the samples that are no plausible reading of their metric
(``Catalogue.out_of_range``: a NaN gauge, a state outside its enumeration, an
optic reading past physical limits); the rest of the frame is kept. Each
drop is reported with its reason, its count and a readable detail.

A device sends the same metric layout frame after frame, so what the checks
need from the catalogue (which ids are unknown, which samples have a range to
be inside) is worked out once per layout and kept (``MAX_LAYOUTS``); each
frame then compares only its gauge and state samples against their ranges.
``admit_all`` compares those of many frames at once, and takes apart only the
frames with a sample to drop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

import numpy as np
from numpy.typing import NDArray

from fabricops.core.catalogue import CATALOGUE, Catalogue
from fabricops.core.frame import Frame
from fabricops.core.identity_memo import IdentityMemo

MAX_LAYOUTS: Final = 4096


@dataclass(frozen=True)
class Dropped:
    """Samples of one frame set aside for one reason."""

    reason: str
    count: int
    detail: str


@dataclass(frozen=True)
class _Checks:
    """What one metric layout needs checked: unknown samples (None: every id is
    known), and the samples with a range (gauges and states) with their bounds."""

    unknown: NDArray[np.bool_] | None
    ranged: NDArray[np.intp]
    gauge: NDArray[np.bool_]
    low: NDArray[np.float64]
    high: NDArray[np.float64]


@lru_cache(maxsize=MAX_LAYOUTS)
def _checks(catalogue: Catalogue, metric: bytes) -> _Checks:
    ids = np.frombuffer(metric, np.uint16).astype(np.int64)
    inside = ids <= catalogue.max_id
    safe = np.where(inside, ids, 0)
    known = inside & catalogue.is_known[safe]
    # a counter is any u64: never out of range
    ranged = np.flatnonzero(known & ~catalogue.is_counter[safe])
    bounds = catalogue.valid_bounds[ids[ranged]]
    return _Checks(None if known.all() else ~known, ranged, catalogue.is_float[ids[ranged]],
                   bounds[:, 0].copy(), bounds[:, 1].copy())


class LayoutChecks:
    """The checks of each metric column, kept between frames by the one who reads
    them: found by the column's identity where a decoder shares one column between a
    device's frames (see ``IdentityMemo``), else by value. Holds at most
    ``max_columns`` columns."""

    def __init__(self, catalogue: Catalogue = CATALOGUE,
                 max_columns: int = 4 * MAX_LAYOUTS) -> None:
        self.catalogue = catalogue
        self._by_column: IdentityMemo[_Checks] = IdentityMemo(max_columns)

    def of(self, metric: NDArray[np.uint16]) -> _Checks:
        hit = self._by_column.get(metric)
        if hit is not None:
            return hit
        return self._by_column.put(
            (metric,), _checks(self.catalogue, np.asarray(metric, np.uint16).tobytes()))


def _plausible(raw: NDArray[np.uint64], gauge: NDArray[np.bool_], low: NDArray[np.float64],
               high: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Per ranged sample, False where ``Catalogue.out_of_range`` would say so."""
    value = np.where(gauge, raw.view(np.float64), raw.astype(np.float64))
    with np.errstate(invalid="ignore"):
        return (value >= low) & (value <= high) & (~gauge | np.isfinite(value))


def _implausible(frame: Frame, checks: _Checks) -> NDArray[np.bool_] | None:
    """Per sample, True where ``Catalogue.out_of_range`` would say so; None for none."""
    ok = _plausible(frame.raw[checks.ranged], checks.gauge, checks.low, checks.high)
    if ok.all():
        return None
    out = np.zeros(len(frame.raw), bool)
    out[checks.ranged[~ok]] = True
    return out


def admit_samples(frame: Frame, catalogue: Catalogue = CATALOGUE,
                  layouts: LayoutChecks | None = None) -> tuple[Frame, list[Dropped]]:
    """``frame`` without the samples it cannot keep, and what was dropped (see module).
    ``layouts`` (of ``catalogue``) keeps each column's checks between calls."""
    if layouts is not None and layouts.catalogue is not catalogue:
        raise ValueError("layout checks of another catalogue")
    checks = (_checks(catalogue, np.asarray(frame.metric, np.uint16).tobytes())
              if layouts is None else layouts.of(frame.metric))
    bad = _implausible(frame, checks)
    if checks.unknown is None and bad is None:
        return frame, []
    unknown = np.zeros(len(frame.raw), bool) if checks.unknown is None else checks.unknown
    implausible = np.zeros(len(frame.raw), bool) if bad is None else bad
    dropped = []
    if unknown.any():
        ids = sorted(set(frame.metric[unknown].tolist()))
        dropped.append(Dropped("unknown_metric", int(unknown.sum()),
                               f"frame of {frame.device}: metric ids {ids} are not in the "
                               f"catalogue; {int(unknown.sum())} samples dropped"))
    if implausible.any():
        i = int(np.flatnonzero(implausible)[0])
        name = catalogue.by_id(int(frame.metric[i])).name
        value = frame.values(catalogue)[i]
        dropped.append(Dropped("out_of_range", int(implausible.sum()),
                               f"frame of {frame.device}: {name} of "
                               f"{frame.entities[frame.entity_idx[i]]} = {value!r} is no "
                               f"plausible reading; {int(implausible.sum())} samples dropped"))
    if not dropped:
        return frame, []
    keep = ~(unknown | implausible)
    return Frame(frame.device, frame.ts_ns, frame.source, frame.seq, frame.entities,
                 frame.entity_idx[keep], frame.metric[keep], frame.raw[keep]), dropped


def admit_all(frames: Sequence[Frame], layouts: LayoutChecks
              ) -> list[tuple[Frame, list[Dropped]]]:
    """``admit_samples`` of each frame (in order), the ranges of all checked at once."""
    checks = [layouts.of(f.metric) for f in frames]
    n = np.array([len(c.ranged) for c in checks], np.int64)
    if not n.any():
        bad = np.zeros(len(frames), bool)
    else:
        sizes = np.array([len(f.raw) for f in frames], np.int64)
        start = np.cumsum(sizes) - sizes
        raw = np.concatenate([f.raw for f in frames])
        pos = np.concatenate([c.ranged for c in checks]) + np.repeat(start, n)
        ok = _plausible(raw[pos], *(np.concatenate([getattr(c, a) for c in checks])
                                    for a in ("gauge", "low", "high")))
        bad = np.bincount(np.repeat(np.arange(len(frames)), n), ~ok, len(frames)) > 0
    return [(f, []) if c.unknown is None and not b else admit_samples(f, layouts.catalogue,
                                                                        layouts)
            for f, c, b in zip(frames, checks, bad.tolist(), strict=True)]
