"""The per-kind sections of a keyframe body (see :mod:`.keyframe` for the layout).

Each ``write_*`` appends a section's bytes to a list (``write_integers`` and
``write_gauges`` are writers of :mod:`.keyframe_batch`: they yield their mode
choice, and ``settle`` runs one alone); each ``read_*`` takes the
same section back from a ``BodyReader`` and raises KeyframeDecodeError naming
what is truncated or inconsistent. Matrices are ``(series, points)``. How the
residuals of a section are stored is the ``ResidualStream`` of the format
version: ``PACKED`` (version 1, bit packing) or the entropy-coded stream of
:mod:`.keyframe_entropy` (version 2).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from fabricops.pipeline import keyframe_modes as km
from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline.keyframe_pack import U64, KeyframeDecodeError

B = NDArray[np.bool_]
F64 = NDArray[np.float64]
_Q_LIMIT = 2.0**52
Choosing = Generator[km.ModeChoice, tuple[kp.U8, U64], None]


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


class ResidualStream(Protocol):
    """How one format version stores the lag residuals of a section's rows."""

    version2_modes: bool
    """Whether modes ``ORDER0`` and (counters) ``RATE_MODE`` exist in this version."""
    step_scale: float
    """Gauges are quantized to steps of ``2 * bound * step_scale``."""

    def write(self, out: list[bytes], modes: kp.U8, e: U64) -> None:
        """Append modes and residuals ``e`` (points 1.. of each row)."""

    def read(self, rd: BodyReader, r: int, cols: int, what: str,
             allow_xor: bool = False, allow_rate: bool = False) -> tuple[kp.U8, U64]:
        """The modes and residuals of ``r`` rows of ``cols`` points, checked."""
        ...


class PackedStream:
    """Version 1: per row a divisor and a bit width, residuals bit packed."""

    version2_modes = False
    step_scale = 1.0

    def write(self, out: list[bytes], modes: kp.U8, e: U64) -> None:
        write_stream(out, modes, e)

    def read(self, rd: BodyReader, r: int, cols: int, what: str,
             allow_xor: bool = False, allow_rate: bool = False) -> tuple[kp.U8, U64]:
        return read_stream(rd, r, cols, what, allow_xor)


PACKED = PackedStream()


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


def write_integers(out: list[bytes], x: U64, stream: ResidualStream = PACKED,
                   ratio: F64 | None = None) -> Choosing:
    """Integer series, keyframe then residuals (counters, timestamps); ``ratio``
    (``rate_ratio`` of the timestamps, version 2 counters) allows ``RATE_MODE``."""
    kf = x[:, 0]
    modes, e = yield km.ModeChoice(kp.offsets(x, kf), stream.version2_modes,
                                   ratio if stream.version2_modes else None)
    out.append(kp.shuffle(kf))
    stream.write(out, modes, e[:, 1:])


def read_integers(rd: BodyReader, r: int, n: int, what: str,
                  stream: ResidualStream = PACKED, ratio: F64 | None = None) -> U64:
    kf = rd.column(r, f"{what} keyframes")
    rate = ratio is not None and stream.version2_modes
    modes, e = stream.read(rd, r, n - 1, what, allow_rate=rate)
    x = np.empty((r, n), np.uint64)
    x[:, 0] = kf
    x[:, 1:] = kp.integrate(e, modes, ratio if rate else None) + kf[:, None]
    return x


def _within(recon: F64, x: F64, bound: F64) -> B:
    """Exactly |recon - x| <= bound (TwoSum recovers the rounding of the difference)."""
    s = recon - x
    t = s - recon
    err = (recon - (s - t)) + (-x - t)
    mag = np.abs(s)
    edge = (mag == bound) & (err * np.sign(s) <= 0)
    return np.asarray(np.isfinite(s) & ((mag < bound) | edge))


def quantize(vals: F64, bound: F64, mask: B, step_scale: float = 1.0
             ) -> tuple[NDArray[np.int64], B]:
    """Steps of ``2 * bound * step_scale`` under ``mask``, and the masked points that
    need an exception (not finite, out of range, or off by more than ``bound``)."""
    step = (2.0 * bound * step_scale)[:, None]
    with np.errstate(all="ignore"):
        ratio = vals / step
        ok = mask & np.isfinite(ratio) & (np.abs(ratio) <= _Q_LIMIT)
        q = np.rint(np.where(ok, ratio, 0.0)).astype(np.int64)
        ok &= _within(q * step, vals, bound[:, None])
    return np.where(ok, q, 0), mask & ~ok


def write_gauges(out: list[bytes], x: U64, valid: B, bound: F64,
                 stream: ResidualStream = PACKED) -> Choosing:
    """Bounds, keyframes, residuals of quantized values (XOR of bits where the bound is 0),
    then the exceptions: points kept as exact float bits (NaN, inf, out of range)."""
    lossy = bound > 0
    q, exc = quantize(x.view(np.float64), bound, valid & lossy[:, None], stream.step_scale)
    ints = ffill(np.where(lossy[:, None], q.view(np.uint64), x), valid & ~exc)
    kf = ints[:, 0].copy()
    modes = np.zeros(len(x), np.uint8)
    e = np.zeros_like(ints)
    modes[lossy], e[lossy] = yield km.ModeChoice(kp.offsets(ints[lossy], kf[lossy]),
                                                 stream.version2_modes)
    e[~lossy, 1:] = ints[~lossy, 1:] ^ ints[~lossy, :-1]
    kf[lossy] = kp.zigzag(kf[lossy])
    out += [bound.astype("<f8").tobytes(), kp.shuffle(kf)]
    stream.write(out, modes, e[:, 1:])
    pos = np.flatnonzero(exc)
    out += [np.uint32(len(pos)).tobytes(), np.diff(pos, prepend=0).astype("<u4").tobytes(),
            kp.shuffle(x.ravel()[pos])]


def read_gauges(rd: BodyReader, r: int, n: int, stream: ResidualStream = PACKED) -> U64:
    bound = np.asarray(rd.array("<f8", r, "gauge bounds"), np.float64)
    if not (np.isfinite(bound) & (bound >= 0)).all():
        raise KeyframeDecodeError("corrupt gauge bounds: negative or not finite")
    kf = rd.column(r, "gauge keyframes")
    modes, e = stream.read(rd, r, n - 1, "gauge", allow_xor=True)
    lossy = bound > 0
    if not np.array_equal(lossy, modes != kp.XOR_MODE):
        raise KeyframeDecodeError("corrupt gauge modes: XOR coding must match a zero bound")
    x = np.empty((r, n), np.uint64)
    x[:, 0] = np.where(lossy, kp.unzigzag(kf), kf)
    y = kp.integrate(e, modes)
    step = 2.0 * bound * stream.step_scale
    if lossy.all():
        x[:, 1:] = y + x[:, :1]
        x = (x.view(np.int64) * step[:, None]).view(np.uint64)
    else:
        x[:, 1:] = np.where(lossy[:, None], y + x[:, :1], y ^ x[:, :1])
        x[lossy] = (x[lossy].view(np.int64) * step[lossy, None]).view(np.uint64)
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
