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

In version 3 the counter section's keyframes are a pcodec chunk
(``keyframe_entropy.write_column``): counters since boot have any magnitude, and
pcodec's bins fit that better than byte planes do.

Layout, after the counter section's residual stream::

    width code u8 | corrections: zigzag values of the rows in ``NORM_MODE`` (in row
    order) x the long points, packed at that width as ``keyframe_pack`` packs a group

The encoder codes a section's rate-mode rows so only where that is smaller.
"""

from __future__ import annotations

from typing import Final, Protocol

import numpy as np
from numpy.typing import NDArray

from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline.keyframe_entropy import read_column, write_column
from fabricops.pipeline.keyframe_pack import U64, KeyframeDecodeError
from fabricops.pipeline.keyframe_series import BodyReader

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
B = NDArray[np.bool_]
NORM_MODE: Final = kp.NORM_MODE
_LIMIT: Final = 2.0**62


def scale(ts_ns: NDArray[np.int64]) -> tuple[F64, B]:
    """For points 1..: ``k = nominal / dt``, and where ``dt`` is longer than nominal."""
    dt = np.diff(ts_ns)
    if len(dt) == 0:
        return np.ones(0), np.zeros(0, bool)
    nominal = np.sort(dt)[(9 * (len(dt) - 1)) // 10]
    k = np.where(dt > 0, nominal / np.maximum(dt, 1).astype(np.float64), 1.0)
    return k, dt > nominal


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
    z = kp.zigzag(np.ascontiguousarray(corr).view(np.uint64))
    code = int(kp.width_codes(z.reshape(1, -1))[0]) if z.size else 0
    out.append(np.uint8(code).tobytes())
    if code:
        out.append(kp.pack_rows(z, np.full(len(z), code, np.uint8)))


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


def write_counters(out: list[bytes], x: U64, ts_ns: NDArray[np.int64], stream: _Stream) -> None:
    """Keyframes, ``stream`` of the residuals (the rate-mode rows as rates where that is
    smaller), then the corrections (version 3 counters, absent points filled)."""
    kf = x[:, 0]
    modes, e = kp.choose_residuals(kp.offsets(x, kf), True, kp.rate_ratio(ts_ns))
    k, long = scale(ts_ns)
    corr = np.zeros((0, int(long.sum())), np.int64)
    rate = np.flatnonzero(modes == kp.RATE_MODE)
    if len(rate):
        q, at_long, ok = normalize((x[rate, 1:] - x[rate, :-1]).view(np.int64), k, long)
        rows = rate[ok]
        as_rates = np.full(len(rows), NORM_MODE, np.uint8)
        fix: list[bytes] = []
        write_corrections(fix, at_long[ok])
        if len(rows) and (stream.size(as_rates, q[ok].view(np.uint64)) + sum(map(len, fix))
                          < stream.size(modes[rows], e[rows, 1:]) + 1):
            modes[rows], e[rows, 1:], corr = NORM_MODE, q[ok].view(np.uint64), at_long[ok]
    write_column(out, kf)
    stream.write(out, modes, e[:, 1:])
    write_corrections(out, corr)


def read_counters(rd: BodyReader, r: int, n: int, ts_ns: NDArray[np.int64],
                  stream: _Stream) -> U64:
    """Inverse of ``write_counters``."""
    kf = read_column(rd, r, "counter keyframes")
    modes, e = stream.read(rd, r, n - 1, "counter", allow_rate=True)
    k, long = scale(ts_ns)
    corr = read_corrections(rd, int((modes == NORM_MODE).sum()), int(long.sum()))
    e, modes = as_deltas(e, modes, k, long, corr)
    x = np.empty((r, n), np.uint64)
    x[:, 0] = kf
    x[:, 1:] = kp.integrate(e, modes, kp.rate_ratio(ts_ns)) + kf[:, None]
    return x


class _Stream(Protocol):
    """What the counter section needs of ``keyframe_entropy.EntropyStream``."""

    def write(self, out: list[bytes], modes: kp.U8, e: U64) -> None: ...

    def size(self, modes: kp.U8, e: U64) -> int: ...

    def read(self, rd: BodyReader, r: int, cols: int, what: str,
             allow_xor: bool = False, allow_rate: bool = False) -> tuple[kp.U8, U64]: ...
