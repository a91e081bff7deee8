"""Integer and byte level coding of the kf1 keyframe codec (see :mod:`.keyframe`).

Everything here works on whole ``(series, points)`` uint64 matrices, never on one
sample at a time, and all integer arithmetic wraps modulo 2**64 so that counter
wraps and resets round-trip bit-exact.

* Lag residuals. Each series has a mode byte: bit 7 set selects order 2 (the
  differences of the differences), clear order 1 (differences); bits 0-6 are the
  lag ``P`` (1..127). With ``y`` the series minus its keyframe and ``d`` its first
  differences, the residual is ``y[i] - y[i-P]`` (order 1) or ``d[i] - d[i-P]``
  (order 2), terms before the first point being 0. Order 2 lag 1 is the classic
  delta-of-delta; lag ``P`` equal to a training job's iteration period (in
  samples) turns its periodic counters and gauges into near-zero residuals. The
  encoder picks per series a mode (order 1 or 2, lag 1..16) of few residual bits
  (:mod:`.keyframe_modes`). Mode 0 (gauges only) is the XOR of consecutive float64 bit patterns.
  Mode 0x80 (order 0, format version 2 only) is ``y`` itself: the best mode for
  noise around a level, such as a sensor reading.
* Rate mode (0x40, format version 2, counters only): the residual is
  ``d[i] - trunc(d[i-1] * dt[i] / dt[i-1])`` with ``dt`` the poll intervals, so
  a steady rate polled with jittery timing leaves only the change of rate; the
  prediction is computed in float64, clipped to +-2**62 and truncated, the same
  on both sides. Decoding it is a loop over points, vectorised across series.
* Division by the series' common divisor (e.g. bytes = packets x frame size),
  then zigzag.
* Packing: each series gets the fewest of 0, 1, 2, 4 bits or 1..8 bytes that
  hold its largest value. Series of a sub-byte width are packed together, first
  value in the low bits; wider series are stored as byte planes, least
  significant plane first, series of one width together.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numpy.typing import NDArray

U64 = NDArray[np.uint64]
U8 = NDArray[np.uint8]
XOR_MODE: Final = 0
ORDER2: Final = 0x80
MAX_LAG: Final = 16
DOD_MODE: Final = ORDER2 | 1
ORDER0: Final = ORDER2
RATE_MODE: Final = 0x40
NORM_MODE: Final = 0x41
"""Format version 3 counters: rates per nominal interval (see ``keyframe_norm``)."""
_PRED_LIMIT: Final = 2.0**62
F64 = NDArray[np.float64]
LAG_MASK: Final = 0x7F
WIDTH_BITS: Final = (0, 1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)
_WIDTH_LIMITS: Final = np.array([1 << b for b in (0, *WIDTH_BITS[1:-1])], dtype=np.uint64)


class KeyframeError(ValueError):
    """A block or a gauge bound that cannot be encoded; the message names the problem."""


class KeyframeDecodeError(KeyframeError):
    """Bytes that are not a valid kf1 payload; the message names the cause."""


def zigzag(e: U64) -> U64:
    """Signed (two's complement) residuals to unsigned, small magnitudes first."""
    s = e.view(np.int64)
    return ((s << 1) ^ (s >> 63)).view(np.uint64)


def unzigzag(z: U64) -> U64:
    return (z >> np.uint64(1)) ^ (np.uint64(0) - (z & np.uint64(1)))


def offsets(x: U64, kf: U64) -> U64:
    """Each series minus its keyframe, wrapping."""
    return x - kf[:, None]


def differences(x: U64) -> NDArray[np.int64]:
    """Per row the steps from point to point (points 1..), wrapping, as int64."""
    d: NDArray[np.int64] = (x[:, 1:] - x[:, :-1]).view(np.int64)
    return d


def first_differences(y: U64) -> U64:
    d = y.copy()
    d[:, 1:] -= y[:, :-1]
    return d


def lagged(base: U64, lag: int) -> U64:
    return lagged_into(base, lag, np.empty_like(base))


def residual_bits(e: U64) -> NDArray[np.int64]:
    """Approximate coded size of each series (the last axis): per residual its zigzag
    bit length plus one, 0 for a zero residual. With ``z`` the zigzag of ``s``,
    ``|2s + 1/4|`` lies in ``[z, z + 1)``, so below the next power of two: the bit
    length comes from the exponent of that float32 value, without the slow unsigned
    conversion. Exact for ``|s| < 2**22``; beyond, float32 may round one bit up."""
    f = np.empty(e.shape, np.float32)
    np.copyto(f, e.view(np.int64), casting="unsafe")
    f *= 2.0
    f += 0.25
    bits = f.view(np.int32)
    bits >>= 23
    bits &= 0xFF  # the biased exponent: 125 for 1/4 (a zero residual), 127 for 1
    bits -= 125
    np.maximum(bits, 0, out=bits)
    return np.asarray(bits.sum(axis=-1, dtype=np.int64))


def lagged_into(base: U64, lag: int, out: U64) -> U64:
    """``base[:, i] - base[:, i - lag]`` (terms before the first point 0), into ``out``."""
    out[:, :lag] = base[:, :lag]
    np.subtract(base[:, lag:], base[:, :-lag], out=out[:, lag:])
    return out


def rate_ratio(ts_ns: NDArray[np.int64]) -> F64:
    """Per point ``dt[i] / dt[i-1]`` of the poll intervals (1 where undefined or not > 0)."""
    ratio = np.ones(len(ts_ns))
    dt = np.diff(ts_ns).astype(np.float64)
    if len(dt) > 1:
        ok = (dt[1:] > 0) & (dt[:-1] > 0)
        ratio[2:] = np.where(ok, dt[1:] / np.where(ok, dt[:-1], 1.0), 1.0)
    return ratio


def _rate_prediction(prev: NDArray[np.int64], ratio: F64 | float) -> U64:
    """``prev * ratio`` in float64, clipped to +-2**62, truncated towards 0."""
    pred = np.clip(prev.astype(np.float64) * ratio, -_PRED_LIMIT, _PRED_LIMIT)
    return pred.astype(np.int64).view(np.uint64)


def rate_residuals(d: U64, ratio: F64) -> U64:
    """``RATE_MODE`` residuals of first differences ``d`` (``d[:, 0]`` is 0); ``ratio``
    is one row for all series or a row per series."""
    e = d.copy()
    e[:, 1:] -= _rate_prediction(d[:, :-1].view(np.int64), ratio[..., 1:])
    return e


def _rate_integrate(e: U64, ratio: F64) -> U64:
    """Inverse of the rate residuals; ``e`` and ``ratio`` hold points 1.. (the loop
    over points computes ``_rate_prediction`` in place, one column at a time)."""
    e_t = np.ascontiguousarray(e.T).view(np.int64)
    d_t = np.empty_like(e_t)
    pred = np.zeros(len(e))
    whole = np.zeros(len(e), np.int64)
    clip = _may_clip(e_t, ratio)
    for j, r in enumerate([*ratio[1:].tolist(), 1.0]):
        np.add(e_t[j], whole, out=d_t[j])
        np.multiply(d_t[j], r, out=pred)
        if clip:
            np.clip(pred, -_PRED_LIMIT, _PRED_LIMIT, out=pred)
        np.copyto(whole, pred, casting="unsafe")
    return np.cumsum(d_t.T.view(np.uint64), axis=1, dtype=np.uint64)


def _may_clip(e_t: NDArray[np.int64], ratio: F64) -> bool:
    """False when no prediction can reach the clip: ``|d[i]| <= |e[i]| + |d[i-1]| * r[i]
    + 1``, so every ``|d|`` is at most (sum |e| + points) times the product of r > 1."""
    total = float(np.abs(e_t.astype(np.float64)).sum(axis=0).max(initial=0.0)) + len(e_t)
    growth = float(np.prod(np.maximum(ratio, 1.0)))
    return not total * growth * 2.0 < _PRED_LIMIT


def integrate(e: U64, modes: U8, ratio: F64 | None = None) -> U64:
    """Inverse of the residuals: ``e`` holds points 1.. of each series; ``ratio`` (of
    all points) is needed where a mode is ``RATE_MODE``."""
    cols = None if ratio is None else ratio[1:]
    runs = runs_of(modes)
    if len(runs) == 0:
        return e.copy()
    if len(runs) == 1:
        return _integrate_one(e, runs[0][0], cols)
    order = np.argsort(modes, kind="stable")
    grouped = e[order]
    for mode, a, b in runs:
        grouped[a:b] = _integrate_one(grouped[a:b], mode, cols)
    y = np.empty_like(e)
    y[order] = grouped
    return y


def runs_of(codes: U8) -> list[tuple[int, int, int]]:
    """Each code present, with the slice of ``argsort(codes, kind="stable")`` holding it."""
    counts = np.bincount(codes, minlength=1)
    ends = np.cumsum(counts)
    present = np.flatnonzero(counts)
    return list(zip(present.tolist(), (ends[present] - counts[present]).tolist(),
                    ends[present].tolist(), strict=True))


def _integrate_one(e: U64, mode: int, ratio: F64 | None) -> U64:
    if mode == XOR_MODE:
        return np.bitwise_xor.accumulate(e, axis=1)
    if mode == ORDER0:
        return e
    if mode == RATE_MODE and ratio is not None:
        return _rate_integrate(e, ratio)
    out = _lag_cumsum(e, mode & LAG_MASK)
    return np.cumsum(out, axis=1, dtype=np.uint64) if mode & ORDER2 else out


def _lag_cumsum(e: U64, lag: int) -> U64:
    if lag == 1:
        return np.cumsum(e, axis=1, dtype=np.uint64)
    r, n = e.shape
    m = -(-n // lag)
    pad = np.zeros((r, m * lag), np.uint64)
    pad[:, :n] = e
    sums = np.cumsum(pad.reshape(r, m, lag), axis=1, dtype=np.uint64)
    return sums.reshape(r, m * lag)[:, :n]


def valid_mode(modes: U8, allow_xor: bool, version2: bool = False,
               allow_rate: bool = False) -> bool:
    """True if every mode is one its format version defines for the section: a lag of 1
    or more, XOR where allowed; in version 2 also ``ORDER0``, and ``RATE_MODE`` where
    allowed (its code is order 1 lag 64 in version 1, which version 2 does not have).
    ``NORM_MODE`` is order 1 lag 65 here (no encoder writes that lag): version 3 counter
    sections read it as their own mode."""
    lag = modes & LAG_MASK
    rate = modes == RATE_MODE
    ok = (lag >= 1) | (allow_xor & (modes == XOR_MODE))
    if version2:
        ok = (ok & ~rate) | (modes == ORDER0) | (allow_rate & rate)
    return bool(ok.all())


def common_divisors(s: NDArray[np.int64]) -> U64:
    """Per row the positive gcd of the signed residuals, 1 where it is 0 or overflows."""
    if s.shape[1] == 0:
        return np.ones(len(s), np.uint64)
    g = np.gcd.reduce(s, axis=1)
    return np.where(g > 0, g, 1).astype(np.uint64)


def width_codes(z: U64) -> U8:
    """Per row the code of the fewest ``WIDTH_BITS`` that hold its largest value."""
    top = z.max(axis=1) if z.shape[1] else np.zeros(len(z), np.uint64)
    return np.searchsorted(_WIDTH_LIMITS, top, side="right").astype(np.uint8)


def packed_size(codes: U8, cols: int) -> int:
    counts = np.bincount(codes, minlength=len(WIDTH_BITS))[:len(WIDTH_BITS)]
    return sum(-(-int(n) * cols * bits // 8) for n, bits in zip(counts, WIDTH_BITS, strict=True))


def pack_rows(z: U64, codes: U8) -> bytes:
    """Rows grouped by width code: sub-byte widths packed LSB first, wider ones as
    byte planes (least significant plane first)."""
    parts = []
    for code in np.unique(codes[codes > 0]).tolist():
        rows = np.flatnonzero(codes == code)
        parts.append(pack_group(z[rows], code))
    return b"".join(parts)


def pack_group(z: U64, code: int) -> bytes:
    """``pack_rows`` of rows that all have width ``code`` (> 0)."""
    return _pack_group(z, WIDTH_BITS[code])


def _pack_group(z: U64, bits: int) -> bytes:
    if bits >= 8:
        r, c = z.shape
        z8 = np.ascontiguousarray(z, "<u8").view(np.uint8).reshape(r, c, 8)
        return z8[:, :, :bits // 8].transpose(2, 0, 1).tobytes()
    per = 8 // bits
    v = np.zeros(-(-z.size // per) * per, np.uint8)
    v[:z.size] = z.ravel()
    shifts = np.arange(0, 8, bits, dtype=np.uint8)
    packed: U8 = np.bitwise_or.reduce(v.reshape(-1, per) << shifts, axis=1)
    return packed.tobytes()


def unpack_group(buf: bytes | memoryview, rows: int, cols: int, code: int) -> U64:
    """Inverse of ``pack_rows`` for rows that all have width ``code`` (> 0); ``buf``
    holds exactly ``group_size(rows, cols, code)`` bytes."""
    raw = np.frombuffer(buf, np.uint8, group_size(rows, cols, code))
    return _unpack_group(raw, rows, cols, WIDTH_BITS[code])


def group_size(rows: int, cols: int, code: int) -> int:
    return -(-rows * cols * WIDTH_BITS[code] // 8)


def unpack_rows(buf: bytes | memoryview, codes: U8, cols: int) -> U64:
    """Inverse of ``pack_rows``; ``buf`` holds exactly ``packed_size`` bytes."""
    out = np.zeros((len(codes), cols), np.uint64)
    pos = 0
    for code in np.unique(codes[codes > 0]).tolist():
        rows = np.flatnonzero(codes == code)
        bits = WIDTH_BITS[code]
        size = -(-rows.size * cols * bits // 8)
        raw = np.frombuffer(buf, np.uint8, size, pos)
        out[rows] = _unpack_group(raw, rows.size, cols, bits)
        pos += size
    return out


def _unpack_group(raw: U8, r: int, c: int, bits: int) -> U64:
    if bits >= 8:
        planes = raw.reshape(bits // 8, r, c)
        z8 = np.zeros((r, c, 8), np.uint8)
        z8[:, :, :bits // 8] = planes.transpose(1, 2, 0)
        return z8.view("<u8").reshape(r, c).astype(np.uint64, copy=False)
    shifts = np.arange(0, 8, bits, dtype=np.uint8)
    v = (raw[:, None] >> shifts) & np.uint8((1 << bits) - 1)
    return v.ravel()[:r * c].reshape(r, c).astype(np.uint64)


def shuffle(x: U64) -> bytes:
    """A column of u64 as 8 byte planes, least significant first."""
    column = np.ascontiguousarray(x, dtype="<u8")
    return column.view(np.uint8).reshape(-1, 8).T.tobytes()


def unshuffle(buf: bytes | memoryview, count: int) -> U64:
    planes = np.frombuffer(buf, np.uint8, 8 * count).reshape(8, count)
    return np.ascontiguousarray(planes.T).view("<u8").reshape(count).astype(np.uint64)
