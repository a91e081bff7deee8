"""The per-kind sections of a kf1 body (see :mod:`.keyframe` for the layout).

Each ``write_*`` appends a section's bytes to a list; each ``read_*`` takes the
same section back from a ``BodyReader`` and raises KeyframeDecodeError naming
what is truncated or inconsistent. Matrices are ``(series, points)``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline.keyframe_pack import U64, KeyframeDecodeError

B = NDArray[np.bool_]
F64 = NDArray[np.float64]
_Q_LIMIT = 2.0**52


class BodyReader:
    """Sequential, bounds-checked reads from a decompressed body."""

    def __init__(self, body: bytes) -> None:
        self.buf = memoryview(body)
        self.pos = 0

    def take(self, size: int, what: str) -> memoryview:
        end = self.pos + size
        if size < 0 or end > len(self.buf):
            raise KeyframeDecodeError(
                f"truncated {what}: needs {size} bytes at offset {self.pos}, "
                f"body has {len(self.buf)}")
        out, self.pos = self.buf[self.pos:end], end
        return out

    def array(self, dtype: str, count: int, what: str) -> NDArray[np.generic]:
        dt = np.dtype(dtype)
        return np.frombuffer(self.take(count * dt.itemsize, what), dt, count)

    def u32(self, what: str) -> int:
        return int(self.array("<u4", 1, what)[0])

    def column(self, count: int, what: str) -> U64:
        return kp.unshuffle(self.take(8 * count, what), count)

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise KeyframeDecodeError(
                f"length mismatch: {len(self.buf) - self.pos} bytes left after the last section")


def ffill(x: U64, valid: B) -> U64:
    """Each invalid point takes the previous valid value of its row (leading: the first)."""
    if valid.all():
        return x
    r, n = x.shape
    idx = np.where(valid, np.arange(r * n).reshape(r, n), -1)
    first = np.where(valid.any(axis=1), valid.argmax(axis=1), 0) + np.arange(r) * n
    idx[:, 0] = np.where(valid[:, 0], idx[:, 0], first)
    filled: U64 = x.ravel()[np.maximum.accumulate(idx.ravel())].reshape(r, n)
    return filled


def write_stream(out: list[bytes], modes: kp.U8, e: U64) -> None:
    """Modes, divisors, width codes and packed residuals ``e`` (points 1..)."""
    lag = modes != kp.XOR_MODE
    z = e.copy()
    g = np.ones(len(e), np.uint64)
    if lag.any():
        s = e[lag].view(np.int64)
        g[lag] = kp.common_divisors(s)
        z[lag] = kp.zigzag((s // g[lag].astype(np.int64)[:, None]).view(np.uint64))
    codes = kp.width_codes(z)
    out += [modes.tobytes(), kp.shuffle(g), codes.tobytes(), kp.pack_rows(z, codes)]


def read_stream(rd: BodyReader, r: int, cols: int, what: str,
                allow_xor: bool = False) -> tuple[kp.U8, U64]:
    modes = np.asarray(rd.array("u1", r, f"{what} modes"), np.uint8)
    if not kp.valid_mode(modes, allow_xor):
        raise KeyframeDecodeError(f"corrupt {what} modes: a lag of 0")
    g = rd.column(r, f"{what} divisors")
    if (g == 0).any():
        raise KeyframeDecodeError(f"corrupt {what} divisors: a divisor of 0")
    codes = np.asarray(rd.array("u1", r, f"{what} widths"), np.uint8)
    if r and int(codes.max()) >= len(kp.WIDTH_BITS):
        raise KeyframeDecodeError(f"corrupt {what} widths: code {int(codes.max())}")
    packed = rd.take(kp.packed_size(codes, cols), f"{what} residuals")
    z = kp.unpack_rows(packed, codes, cols)
    lag = modes != kp.XOR_MODE
    if lag.all():
        e = kp.unzigzag(z)
        return modes, (e * g[:, None] if (g != 1).any() else e)
    return modes, np.where(lag[:, None], kp.unzigzag(z) * g[:, None], z)


def write_integers(out: list[bytes], x: U64) -> None:
    """Integer series, keyframe then lag residuals (counters, timestamps)."""
    kf = x[:, 0]
    modes, e = kp.choose_residuals(kp.offsets(x, kf))
    out.append(kp.shuffle(kf))
    write_stream(out, modes, e[:, 1:])


def read_integers(rd: BodyReader, r: int, n: int, what: str) -> U64:
    kf = rd.column(r, f"{what} keyframes")
    modes, e = read_stream(rd, r, n - 1, what)
    x = np.empty((r, n), np.uint64)
    x[:, 0] = kf
    x[:, 1:] = kp.integrate(e, modes) + kf[:, None]
    return x


def write_counters(out: list[bytes], x: U64, valid: B) -> None:
    write_integers(out, ffill(x, valid))


def _within(recon: F64, x: F64, bound: F64) -> B:
    """Exactly |recon - x| <= bound (TwoSum recovers the rounding of the difference)."""
    s = recon - x
    t = s - recon
    err = (recon - (s - t)) + (-x - t)
    mag = np.abs(s)
    edge = (mag == bound) & (err * np.sign(s) <= 0)
    return np.asarray(np.isfinite(s) & ((mag < bound) | edge))


def quantize(vals: F64, bound: F64, mask: B) -> tuple[NDArray[np.int64], B]:
    """Steps of 2*bound under ``mask``, and the masked points that need an exception."""
    step = (2.0 * bound)[:, None]
    with np.errstate(all="ignore"):
        ratio = vals / step
        ok = mask & np.isfinite(ratio) & (np.abs(ratio) <= _Q_LIMIT)
        q = np.rint(np.where(ok, ratio, 0.0)).astype(np.int64)
        ok &= _within(q * step, vals, bound[:, None])
    return np.where(ok, q, 0), mask & ~ok


def write_gauges(out: list[bytes], x: U64, valid: B, bound: F64) -> None:
    """Bounds, keyframes, residuals of quantized values (XOR of bits where the bound is 0),
    then the exceptions: points kept as exact float bits (NaN, inf, out of range)."""
    lossy = bound > 0
    q, exc = quantize(x.view(np.float64), bound, valid & lossy[:, None])
    ints = ffill(np.where(lossy[:, None], q.view(np.uint64), x), valid & ~exc)
    kf = ints[:, 0].copy()
    modes = np.zeros(len(x), np.uint8)
    e = np.zeros_like(ints)
    modes[lossy], e[lossy] = kp.choose_residuals(kp.offsets(ints[lossy], kf[lossy]))
    e[~lossy, 1:] = ints[~lossy, 1:] ^ ints[~lossy, :-1]
    kf[lossy] = kp.zigzag(kf[lossy])
    out += [bound.astype("<f8").tobytes(), kp.shuffle(kf)]
    write_stream(out, modes, e[:, 1:])
    pos = np.flatnonzero(exc)
    out += [np.uint32(len(pos)).tobytes(), np.diff(pos, prepend=0).astype("<u4").tobytes(),
            kp.shuffle(x.ravel()[pos])]


def read_gauges(rd: BodyReader, r: int, n: int) -> U64:
    bound = np.asarray(rd.array("<f8", r, "gauge bounds"), np.float64)
    if not (np.isfinite(bound) & (bound >= 0)).all():
        raise KeyframeDecodeError("corrupt gauge bounds: negative or not finite")
    kf = rd.column(r, "gauge keyframes")
    modes, e = read_stream(rd, r, n - 1, "gauge", allow_xor=True)
    lossy = bound > 0
    if not np.array_equal(lossy, modes != kp.XOR_MODE):
        raise KeyframeDecodeError("corrupt gauge modes: XOR coding must match a zero bound")
    x = np.empty((r, n), np.uint64)
    x[:, 0] = np.where(lossy, kp.unzigzag(kf), kf)
    y = kp.integrate(e, modes)
    x[:, 1:] = np.where(lossy[:, None], y + x[:, :1], y ^ x[:, :1])
    if lossy.any():
        x[lossy] = (x[lossy].view(np.int64) * (2.0 * bound[lossy])[:, None]).view(np.uint64)
    _read_exceptions(rd, x)
    return x


def _read_exceptions(rd: BodyReader, x: U64) -> None:
    count = rd.u32("gauge exception count")
    pos = _positions(rd, count, x.size, "gauge exception")
    np.put(x, pos, rd.column(count, "gauge exception values"))


def _positions(rd: BodyReader, count: int, size: int, what: str) -> NDArray[np.int64]:
    deltas = rd.array("<u4", count, f"{what} positions").astype(np.int64)
    pos = np.cumsum(deltas)
    if count and ((deltas[1:] == 0).any() or pos[-1] >= size):
        raise KeyframeDecodeError(f"corrupt {what} positions: repeated or out of the block")
    return pos


def write_states(out: list[bytes], x: U64, valid: B) -> None:
    """Keyframes, then (position, value) of every change."""
    ints = ffill(x, valid)
    r, n = ints.shape
    kf = ints[:, 0]
    change = np.zeros((r, n), bool)
    change[:, 1:] = ints[:, 1:] != ints[:, :-1]
    pos = np.flatnonzero(change)
    out += [kp.shuffle(kf), np.uint32(len(pos)).tobytes(),
            np.diff(pos, prepend=0).astype("<u4").tobytes(), kp.shuffle(ints.ravel()[pos])]


def read_states(rd: BodyReader, r: int, n: int) -> U64:
    kf = rd.column(r, "state keyframes")
    count = rd.u32("state change count")
    pos = _positions(rd, count, r * n, "state change")
    if count and (pos % n == 0).any():
        raise KeyframeDecodeError("corrupt state change positions: a change at a keyframe")
    flat = np.zeros(r * n, np.uint64)
    mark = np.zeros(r * n, bool)
    flat[::n], mark[::n] = kf, True
    flat[pos], mark[pos] = rd.column(count, "state change values"), True
    idx = np.maximum.accumulate(np.where(mark, np.arange(r * n), 0))
    return flat[idx].reshape(r, n)
