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
  encoder picks per series the mode (order 1 or 2, lag 1..16) of fewest residual
  bits. Mode 0 (gauges only) is the XOR of consecutive float64 bit patterns.
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
_LAG_MASK: Final = 0x7F
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


def _first_differences(y: U64) -> U64:
    d = y.copy()
    d[:, 1:] -= y[:, :-1]
    return d


def _lagged(base: U64, lag: int) -> U64:
    e = base.copy()
    e[:, lag:] -= base[:, :-lag]
    return e


def _cost(e: U64) -> NDArray[np.int64]:
    """Approximate coded size of each row: bit lengths of the zigzag residuals."""
    bits = np.frexp(zigzag(e).astype(np.float64))[1]
    return np.asarray(bits.sum(axis=1, dtype=np.int64) + np.count_nonzero(bits, axis=1))


def choose_residuals(y: U64) -> tuple[U8, U64]:
    """Per series the cheapest lag mode and its residuals; ``y[:, 0]`` must be 0."""
    n = y.shape[1]
    d = _first_differences(y)
    modes = np.full(len(y), DOD_MODE, np.uint8)
    best = _lagged(d, 1)
    cost = _cost(best)
    candidates = [(ORDER2 | lag, d) for lag in range(2, min(MAX_LAG, n - 1) + 1)]
    candidates += [(lag, y) for lag in range(1, min(MAX_LAG, n - 1) + 1)]
    for mode, base in candidates:
        e = _lagged(base, mode & _LAG_MASK)
        c = _cost(e)
        better = c < cost
        if better.any():
            modes[better], cost[better], best[better] = mode, c[better], e[better]
    return modes, best


def integrate(e: U64, modes: U8) -> U64:
    """Inverse of the lag residuals: ``e`` holds points 1.. of each series (mode != 0)."""
    kinds = np.unique(modes)
    if len(kinds) == 1:
        return _integrate_one(e, int(kinds[0]))
    y = np.empty_like(e)
    for mode in kinds.tolist():
        rows = np.flatnonzero(modes == mode)
        y[rows] = _integrate_one(e[rows], mode)
    return y


def _integrate_one(e: U64, mode: int) -> U64:
    if mode == XOR_MODE:
        return np.bitwise_xor.accumulate(e, axis=1)
    out = _lag_cumsum(e, mode & _LAG_MASK)
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


def valid_mode(modes: U8, allow_xor: bool) -> bool:
    """True if every mode has a lag of 1 or more, or is XOR where that is allowed."""
    lag = modes & _LAG_MASK
    ok = (lag >= 1) | (allow_xor & (modes == XOR_MODE))
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
        parts.append(_pack_group(z[rows], WIDTH_BITS[code]))
    return b"".join(parts)


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
