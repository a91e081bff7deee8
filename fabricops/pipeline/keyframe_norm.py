"""Counters as rates per nominal poll interval (mode ``NORM_MODE``, format version 3).

A training job's traffic comes in on/off phases: a port's increments jump
between a few levels (idle, one collective, two), with noise around each. Rate
mode codes the change from one poll to the next, so each phase change costs a
full jump and the noise is counted twice. Here a row stores instead its
increments rescaled to one nominal interval,

    q[i] = rint(d[i] * k[i]),   k[i] = nominal / dt[i]

(``d`` the first differences of points 1.., ``dt`` the poll intervals, the
nominal interval the 90th percentile of ``dt``: exact integers, no float
quantile), in a chunk of its own that pcodec codes with lookback deltas: a
value repeats a recent level, whichever phase it was in. Decoding takes
``rint(q[i] / k[i])`` back, plus a *correction* at the points whose interval is
longer than the nominal one (there a rounded rate can stand for two
increments); a row is coded so only if every other point needs none. All float
arithmetic is float64, clipped to +-2**62 and rounded half to even, the same
on both sides.

The corrections, after the counter section's residual stream (see
:mod:`.keyframe_counters`)::

    width code u8 | corrections: zigzag values of the rows in ``NORM_MODE`` (in row
    order) x the long points, packed at that width as ``keyframe_pack`` packs a group
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import NDArray

from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline.keyframe_pack import U64, KeyframeDecodeError
from fabricops.pipeline.keyframe_series import BodyReader

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
B = NDArray[np.bool_]
NORM_MODE: Final = kp.NORM_MODE
_LIMIT: Final = 2.0**62


def scale(ts_ns: NDArray[np.int64]) -> tuple[F64, B]:
    """For points 1..: ``k = nominal / dt``, and where ``dt`` is longer than nominal
    (timestamps strictly increasing; else every ``k`` is 1)."""
    dt = np.diff(ts_ns)
    if len(dt) == 0 or int(dt.min()) <= 0:
        return np.ones(len(dt)), np.zeros(len(dt), bool)
    nominal = np.sort(dt)[(9 * (len(dt) - 1)) // 10]
    return nominal / dt.astype(np.float64), dt > nominal


def rates(d: I64, k: F64) -> I64:
    """``rint(d * k)`` per point, clipped."""
    out: I64 = np.rint(np.clip(d * k, -_LIMIT, _LIMIT)).astype(np.int64)
    return out


def increments(q: I64, k: F64) -> I64:
    """``rint(q / k)`` per point, clipped: the increments before corrections."""
    out: I64 = np.rint(np.clip(q / k, -_LIMIT, _LIMIT)).astype(np.int64)
    return out


def normalize(d: I64, k: F64, long: B) -> tuple[I64, I64, B]:
    """Rates ``q``, corrections at the long points, and which rows need no other."""
    q = rates(d, k)
    corr = (d.view(np.uint64) - increments(q, k).view(np.uint64)).view(np.int64)
    ok = ~(corr[:, ~long] != 0).any(axis=1)
    return q, corr[:, long], ok


def restore(q: I64, k: F64, long: B, corr: I64) -> I64:
    """Inverse of ``normalize`` for rows it accepted: the increments ``d``."""
    d = increments(q, k)
    if long.any():
        d[:, long] = (d[:, long].view(np.uint64) + corr.view(np.uint64)).view(np.int64)
    return d


def write_corrections(out: list[bytes], corr: I64) -> None:
    """The corrections of the rows in ``NORM_MODE`` at the long points (layout above)."""
    z = kp.zigzag(np.ascontiguousarray(corr).view(np.uint64))
    code = int(kp.width_codes(z.reshape(1, -1))[0]) if z.size else 0
    out.append(np.uint8(code).tobytes())
    if code:
        out.append(kp.pack_group(z, code))


def read_corrections(rd: BodyReader, rows: int, points: int) -> I64:
    """The corrections of ``rows`` rows at ``points`` long points; KeyframeDecodeError
    for a width code that does not exist."""
    code = int(np.asarray(rd.array("u1", 1, "correction width"))[0])
    if code >= len(kp.WIDTH_BITS):
        raise KeyframeDecodeError(f"corrupt correction width: code {code}")
    if code == 0 or rows * points == 0:
        return np.zeros((rows, points), np.int64)
    raw = rd.take(kp.group_size(rows, points, code), "corrections")
    return kp.unzigzag(kp.unpack_group(raw, rows, points, code)).view(np.int64)


def as_deltas(e: U64, modes: kp.U8, k: F64, long: B, corr: I64) -> tuple[U64, kp.U8]:
    """Stream values ``e`` (points 1..) with the rows in ``NORM_MODE`` turned into their
    increments and mode order 1 lag 1 (``keyframe_pack.integrate`` sums them)."""
    norm = modes == NORM_MODE
    if not norm.any():
        return e, modes
    e, modes = e.copy(), modes.copy()
    e[norm] = restore(e[norm].view(np.int64), k, long, corr).view(np.uint64)
    modes[norm] = 1
    return e, modes

