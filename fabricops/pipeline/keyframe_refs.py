"""Counters coded from a sibling counter (keyframe format version 3).

Counters of one entity move together: a port's packets follow its octets (over
the frame size), its PFC pauses follow its ECN marks, a NIC's CNPs its marked
packets. Version 3 lets a counter row be coded against another row of the
block, its *reference*: in place of its first differences ``d`` (points 1..,
wrapping uint64 read as int64) the row stores

    d[i] - rint(d_ref[i] * ratio)

(the keyframe is unchanged) and then goes through the residual modes like any
other row. The prediction is computed in float64 from the stored float32
``ratio``, clipped to +-2**62 and rounded half to even (``np.rint``): the same on
both sides. A reference row has no reference itself, so decoding is one pass:
every row as stored, then each referencing row from its (final) reference.

Layout, at the start of the counter section::

    n u32 | row steps u32[n] (each row minus the one before, the first itself; rows
    strictly ascending) | reference offsets i32[n] (row minus reference) |
    ratio f32[n] as 4 byte planes, least significant first

The encoder (``choose``) tries, for each costly row, the costliest rows of the
same entity that cost at least as much as it does as its reference, with the
ratio of their summed increments, and keeps a reference only where the
estimated residual bits, plus what the table entry costs, are fewer than the
row's own (estimates: ``keyframe_pack.residual_bits`` of first and second
differences).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from numpy.typing import NDArray

from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline.keyframe_pack import U64, KeyframeDecodeError
from fabricops.pipeline.keyframe_series import BodyReader

I64 = NDArray[np.int64]
F32 = NDArray[np.float32]
CANDIDATES: Final = 3
"""Per row, how many of its entity's costliest rows are tried as its reference."""
ENTRY_BITS: Final = 64
"""What a reference is taken to cost in the table: 12 bytes written (a step, an offset,
a ratio), about 8 after zstd (the step and offset are small, the ratio's low byte 0)."""
_LIMIT: Final = 2.0**62


@dataclass(frozen=True)
class References:
    """Rows coded from a reference row, with the ratio of the prediction."""

    row: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    ref: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    ratio: F32 = field(default_factory=lambda: np.zeros(0, np.float32))

    def __len__(self) -> int:
        return len(self.row)


def predict(d_ref: I64, ratio: F32) -> U64:
    """``rint(d_ref * ratio)`` per row, in float64, clipped to +-2**62, as wrapping uint64."""
    pred = np.clip(d_ref.astype(np.float64) * ratio.astype(np.float64)[:, None], -_LIMIT, _LIMIT)
    out: U64 = np.rint(pred).astype(np.int64).view(np.uint64)
    return out


def choose(x: U64, entity: I64) -> References:
    """The references worth their table entry for counter rows ``x`` (absent points filled)
    of entities ``entity`` (one per row): each costly row against the ``CANDIDATES``
    costliest rows of its entity (no cheaper than itself), the best kept when it saves
    bits."""
    r, n = x.shape
    if r < 2 or n < 3:
        return References()
    d = kp.differences(x)
    second = kp.differences(d.view(np.uint64)).view(np.uint64)
    own = np.minimum(kp.residual_bits(d.view(np.uint64)), kp.residual_bits(second))
    busy = np.flatnonzero(own > 2 * ENTRY_BITS)  # a cheaper row cannot gain its entry back
    if len(busy) < 2:
        return References()
    by = busy[np.lexsort((-own[busy], entity[busy]))]  # by entity, costliest first
    group = entity[by]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, len(by)]))
    best_gain = np.zeros(len(by), np.int64)
    best_ref = np.full(len(by), -1, np.int64)
    best_ratio = np.zeros(len(by), np.float32)
    for rank in range(CANDIDATES):
        at = first + rank
        ok = np.flatnonzero((at < len(by)) & (at != np.arange(len(by))))
        ok = ok[group[np.minimum(at[ok], len(by) - 1)] == group[ok]]
        if len(ok) == 0:
            continue
        rows, refs = by[ok], by[at[ok]]
        ratio = _ratios(d[rows], d[refs])
        e = d[rows].view(np.uint64) - predict(d[refs], ratio)
        gain = own[rows] - kp.residual_bits(e) - ENTRY_BITS
        # the costlier series predicts the cheaper (octets the packets, not the reverse)
        better = np.flatnonzero((gain > best_gain[ok]) & np.isfinite(ratio)
                                & (own[refs] >= own[rows]))
        take = ok[better]
        best_gain[take], best_ref[take], best_ratio[take] = gain[better], refs[better], \
            ratio[better]
    return _one_level(by, best_ref, best_ratio, best_gain)


@dataclass(frozen=True, eq=False)
class RefChoice:
    """What the counter section's writer asks of ``choose`` (see :mod:`.keyframe_batch`:
    the requests of many blocks are served in one call)."""

    x: U64
    entity: I64

    @property
    def key(self) -> Hashable:
        """Requests of one key are served together."""
        return RefChoice, self.x.shape[1]

    @property
    def size(self) -> int:
        """Values the request stacks."""
        return int(self.x.size)

    @staticmethod
    def serve(requests: list[RefChoice]) -> list[References]:
        """Each request's ``choose``, from one call over their stacked rows: each block's
        entities numbered apart from the others', so no row finds a reference outside
        its own block, and within it the same ones, in the same order."""
        if len(requests) == 1:
            return [choose(requests[0].x, requests[0].entity)]
        entity, base = [], 0
        for r in requests:
            if len(r.entity):
                entity.append(r.entity - r.entity.min() + base)
                base = int(entity[-1].max()) + 1
        refs = choose(np.concatenate([r.x for r in requests]),
                      np.concatenate(entity) if entity else np.zeros(0, np.int64))
        starts = np.cumsum([0] + [len(r.x) for r in requests])
        cut = np.searchsorted(refs.row, starts)
        return [References(refs.row[a:b] - lo, refs.ref[a:b] - lo, refs.ratio[a:b])
                for a, b, lo in zip(cut[:-1], cut[1:], starts[:-1].tolist(), strict=True)]


def _ratios(d_row: I64, d_ref: I64) -> F32:
    """Per row the ratio of its summed increments to its reference's, over the points
    where both only rose (a wrap or a reset would skew it), as float32 (0 if none)."""
    ok = (d_row >= 0) & (d_ref > 0)
    num = np.where(ok, d_row, 0).astype(np.float64).sum(axis=1)
    den = np.where(ok, d_ref, 0).astype(np.float64).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where(den > 0, num / den, 0.0).astype(np.float32)
    # 16 significant bits are plenty for a prediction; the low byte left 0 costs nothing
    bits = ratio.view(np.uint32)
    rounded = ((bits.astype(np.uint64) + 0x80) & ~np.uint64(0xFF)).astype(np.uint32)
    return np.where(np.isfinite(ratio), rounded.view(np.float32), ratio)


def _one_level(rows: I64, ref: I64, ratio: F32, gain: I64) -> References:
    """The chosen references, largest gain first, without a row that is both referenced
    and referencing (decoding is then one pass)."""
    chosen = np.flatnonzero(ref >= 0)
    coded: set[int] = set()
    used: set[int] = set()
    keep = []
    for i in chosen[np.argsort(-gain[chosen], kind="stable")].tolist():
        row, to = int(rows[i]), int(ref[i])
        if row in used or to in coded:
            continue
        coded.add(row)
        used.add(to)
        keep.append(i)
    if not keep:
        return References()
    idx = np.array(keep)[np.argsort(rows[keep])]
    return References(rows[idx].astype(np.int64), ref[idx].astype(np.int64), ratio[idx])


def remove(x: U64, refs: References) -> U64:
    """``x`` with each referencing row coded against its reference (the encoder's side)."""
    if not len(refs):
        return x
    out = x.copy()
    d = kp.differences(x)
    resid = d[refs.row].view(np.uint64) - predict(d[refs.ref], refs.ratio)
    out[refs.row, 1:] = np.cumsum(resid, axis=1, dtype=np.uint64) + x[refs.row, :1]
    return out


def restore(coded: U64, refs: References) -> U64:
    """Inverse of ``remove``: the referencing rows from their stored form and their
    references (which ``read`` checked are stored as they are)."""
    if not len(refs):
        return coded
    out = coded.copy()
    d = kp.differences(coded)
    rows = d[refs.row].view(np.uint64) + predict(d[refs.ref], refs.ratio)
    out[refs.row, 1:] = np.cumsum(rows, axis=1, dtype=np.uint64) + coded[refs.row, :1]
    return out


def write(out: list[bytes], refs: References) -> None:
    """The table: rows as steps from the previous one, references as offsets back from
    their row, ratios as byte planes (mostly small numbers and a zero plane: zstd's)."""
    steps = np.diff(refs.row, prepend=0)
    out += [np.uint32(len(refs)).tobytes(), steps.astype("<u4").tobytes(),
            (refs.row - refs.ref).astype("<i4").tobytes(),
            refs.ratio.astype("<f4").view(np.uint8).reshape(-1, 4).T.tobytes()]


def read(rd: BodyReader, rows: int) -> References:
    """The table of a section of ``rows`` counter rows; KeyframeDecodeError if it is not
    one ``write`` can make."""
    n = rd.u32("counter reference count")
    if n > rows:
        raise KeyframeDecodeError(f"corrupt counter references: {n} for {rows} rows")
    steps = rd.array("<u4", n, "referencing rows").astype(np.int64)
    back = rd.array("<i4", n, "reference offsets").astype(np.int64)
    planes = np.asarray(rd.array("u1", 4 * n, "reference ratios"), np.uint8)
    ratio = np.ascontiguousarray(planes.reshape(4, n).T).view("<f4").reshape(n)
    if (steps[1:] == 0).any():
        raise KeyframeDecodeError("corrupt counter references: rows not in ascending order")
    row = np.cumsum(steps)
    ref = row - back
    if n and (int(row[-1]) >= rows or int(ref.max()) >= rows or int(ref.min()) < 0):
        raise KeyframeDecodeError("corrupt counter references: a row outside the section")
    if np.isin(ref, row).any():
        raise KeyframeDecodeError("corrupt counter references: a reference is referencing")
    if not np.isfinite(ratio).all():
        raise KeyframeDecodeError("corrupt counter references: a ratio is not finite")
    return References(row, ref, ratio.astype(np.float32))

