"""The entropy-coded residual stream of keyframe format version 2.

Version 1 packs each row's residuals at one bit width for the whole window, so
a counter that is idle half the time and busy the other half pays the busy
width everywhere. Version 2 hands the residuals to pcodec (PyPI ``pcodec``),
which bins them and entropy-codes the bins (tANS): an idle stretch costs a
fraction of a bit a sample and a noisy one close to its entropy.

Layout of ``stream(rows)`` in version 2 (little-endian)::

    mode u8[rows] | divisor u64 planes | group u8[rows] |
    per group g in 1..11 (version 3 also 17..27) present in ``group``, ascending:
        head u32 (bit 31: packed; bits 0-30: chunk length) | chunk

A row's residuals are divided by its divisor (lag modes; XOR rows keep their
bit patterns) and read as int64; its group is the ``WIDTH_BITS`` code of its
largest zigzag residual (0: every residual is 0, nothing stored). A group's
chunk holds its rows' points 1.. one row after the other, in row order: a
pcodec standalone chunk of int64 values, or (bit 31 set) their zigzag values
packed at the group's width as version 1 packs them (bits, or byte planes),
which the encoder picks where that is smaller after zstd: the repetitive
residuals of periodic traffic, whose repeats zstd finds and pcodec does not.
Modes may be ``ORDER0`` and, in counter sections, ``RATE_MODE`` as well as the
version 1 modes (see :mod:`.keyframe_pack`). In version 3 the rows in
``NORM_MODE`` (counters as rates, :mod:`.keyframe_norm`) have their width code
plus ``LOOKBACK_GROUP`` (16) as group, so their chunks hold nothing else, and
pcodec may code those with lookback deltas.

Gauges are quantized to steps a hair under ``2 * bound`` (``step_scale``):
readings a device reports on a grid as fine as the bound (optics at 0.01 dBm
with a 0.01 bound) then round to a step instead of landing exactly on the
bound, where float rounding would make half of them exceptions.

Decoding allocates what the block's counts allow: each chunk is decompressed
into an array of exactly the size its rows need, and a chunk with fewer or more
values, another number type or corrupt bytes is a KeyframeDecodeError. One
exception, pcodec's: a chunk that declares lookback deltas (a corrupt one may)
makes pcodec reserve its declared window, at most 2**24 values twice (256 MB of
address space, which a corrupt chunk leaves untouched, so not resident).
"""

from __future__ import annotations

import threading
from typing import Final

import numpy as np
import zstandard
from numpy.typing import NDArray
from pcodec import ChunkConfig, DeltaSpec, standalone

from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline.keyframe_pack import U64, KeyframeDecodeError
from fabricops.pipeline.keyframe_series import BodyReader

PCODEC_LEVEL: Final = 8
_CONFIG: Final = ChunkConfig(compression_level=PCODEC_LEVEL, delta_spec=DeltaSpec.no_op())
_LOOKBACK: Final = ChunkConfig(compression_level=PCODEC_LEVEL,
                               delta_spec=DeltaSpec.try_lookback())
LOOKBACK_GROUP: Final = 0x10
"""Version 3: added to the group code of rows in ``NORM_MODE``, whose chunk is their own
(pcodec may code it with lookback deltas: a rate repeats a recent level)."""
_FATAL: Final = (KeyboardInterrupt, SystemExit, GeneratorExit)
_PACKED_FLAG: Final = 1 << 31
_local = threading.local()  # a ZstdCompressor is not thread-safe: one per thread


class EntropyStream:
    """Version 2 residual stream: divisors, groups by width, one chunk per group; with
    ``lookback`` (version 3) the rows in ``NORM_MODE`` form groups of their own."""

    version2_modes = True
    step_scale = 1.0 - 2.0**-20

    def __init__(self, lookback: bool = False) -> None:
        self.lookback = lookback

    def write(self, out: list[bytes], modes: kp.U8, e: U64) -> None:
        s, g = _divided(e, modes != kp.XOR_MODE)
        z = kp.zigzag(s.view(np.uint64))
        groups = kp.width_codes(z)
        if self.lookback:
            groups[(modes == kp.NORM_MODE) & (groups > 0)] |= LOOKBACK_GROUP
        out += [modes.tobytes(), kp.shuffle(g), groups.tobytes()]
        codes = np.unique(groups[groups > 0]).tolist()
        whole = len(codes) == 1 and bool(groups.all())  # one group of every row
        for code in codes:
            rows = slice(None) if whole else groups == code  # a slice: no gather
            out += _group_chunk(s[rows], z[rows], code)

    def size(self, modes: kp.U8, e: U64) -> int:
        """The bytes ``write`` appends for these rows."""
        out: list[bytes] = []
        self.write(out, modes, e)
        return sum(map(len, out))

    def read(self, rd: BodyReader, r: int, cols: int, what: str,
             allow_xor: bool = False, allow_rate: bool = False) -> tuple[kp.U8, U64]:
        modes = np.asarray(rd.array("u1", r, f"{what} modes"), np.uint8)
        if not kp.valid_mode(modes, allow_xor, version2=True, allow_rate=allow_rate):
            raise KeyframeDecodeError(f"corrupt {what} modes: a mode this section lacks")
        g = rd.column(r, f"{what} divisors")
        if (g == 0).any():
            raise KeyframeDecodeError(f"corrupt {what} divisors: a divisor of 0")
        if ((g != 1) & (modes == kp.XOR_MODE)).any():
            raise KeyframeDecodeError(f"corrupt {what} divisors: a divisor on an XOR row")
        groups = np.asarray(rd.array("u1", r, f"{what} groups"), np.uint8)
        self._check_groups(groups, modes, what)
        s = np.zeros((r, cols), np.int64)
        order = np.argsort(groups, kind="stable")
        for code, a, b in kp.runs_of(groups):
            if code:
                s[order[a:b]] = _read_group(rd, code, b - a, cols, what)
        e = s.view(np.uint64)
        return modes, (e * g[:, None] if (g != 1).any() else e)

    def _check_groups(self, groups: kp.U8, modes: kp.U8, what: str) -> None:
        width = groups & ~np.uint8(LOOKBACK_GROUP) if self.lookback else groups
        if len(groups) and int(width.max()) >= len(kp.WIDTH_BITS):
            raise KeyframeDecodeError(f"corrupt {what} groups: code {int(groups.max())}")
        if self.lookback and not np.array_equal(
                groups >= LOOKBACK_GROUP, (modes == kp.NORM_MODE) & (width > 0)):
            raise KeyframeDecodeError(f"corrupt {what} groups: a lookback group must hold "
                                      "exactly the rate rows")


def _divided(e: U64, lag: NDArray[np.bool_]) -> tuple[NDArray[np.int64], U64]:
    """The residuals as int64, the ``lag`` rows divided by their common divisor, and
    each row's divisor (1 for the others); ``e`` itself where every divisor is 1."""
    s = e.view(np.int64)
    g = np.ones(len(e), np.uint64)
    if not lag.any():
        return s, g
    whole = bool(lag.all())
    div = kp.common_divisors(s if whole else s[lag])
    if (div == 1).all():
        return s, g
    g[lag] = div
    s = s.copy()
    if whole:
        s //= div.astype(np.int64)[:, None]
    else:
        s[lag] //= div.astype(np.int64)[:, None]
    return s, g


def _group_chunk(s: NDArray[np.int64], z: U64, code: int) -> list[bytes]:
    """Header and bytes of one group (``z`` the zigzag of ``s``): pcodec, or packed where
    that is smaller after zstd."""
    config = _LOOKBACK if code & LOOKBACK_GROUP else _CONFIG
    code &= ~LOOKBACK_GROUP
    chunk = standalone.simple_compress(np.ascontiguousarray(s).ravel(), config)
    packed = kp.pack_group(z, code)
    estimate = _local.__dict__.get("zstd") or _local.__dict__.setdefault(
        "zstd", zstandard.ZstdCompressor(level=3))
    if len(estimate.compress(packed)) < len(chunk):
        return [np.uint32(len(packed) | _PACKED_FLAG).tobytes(), packed]
    return [np.uint32(len(chunk)).tobytes(), chunk]


def _read_group(rd: BodyReader, code: int, rows: int, cols: int, what: str
                ) -> NDArray[np.int64]:
    code &= ~LOOKBACK_GROUP
    head = rd.u32(f"{what} chunk length")
    size = head & ~_PACKED_FLAG
    chunk = rd.take(size, f"{what} chunk")
    if not head & _PACKED_FLAG:
        return _decompress(chunk, rows * cols, what).reshape(rows, cols)
    if size != kp.group_size(rows, cols, code):
        raise KeyframeDecodeError(f"corrupt {what} chunk: {size} packed bytes for {rows} rows "
                                  f"of {cols} points at {kp.WIDTH_BITS[code]} bits")
    return kp.unzigzag(kp.unpack_group(chunk, rows, cols, code)).view(np.int64)


def _decompress(chunk: memoryview, size: int, what: str) -> NDArray[np.int64]:
    """Exactly ``size`` int64 values from one pcodec chunk, or KeyframeDecodeError."""
    dst = np.empty(size, np.int64)
    if size == 0:
        raise KeyframeDecodeError(f"corrupt {what} groups: a chunk for rows with no points")
    try:
        progress = standalone.simple_decompress_into(bytes(chunk), dst)
    except BaseException as exc:
        if isinstance(exc, _FATAL):
            raise
        raise KeyframeDecodeError(f"corrupt {what} chunk: {exc}") from None
    if progress.n_processed != size or not progress.finished:
        raise KeyframeDecodeError(f"corrupt {what} chunk: {progress.n_processed} values "
                                  f"where the block needs {size}")
    return dst


def write_column(out: list[bytes], x: U64) -> None:
    """A column of values of any magnitudes (a section's keyframes): u32 length | a
    pcodec chunk of their bits as int64 (nothing after the length when empty)."""
    chunk = standalone.simple_compress(np.ascontiguousarray(x).view(np.int64), _CONFIG) \
        if len(x) else b""
    out += [np.uint32(len(chunk)).tobytes(), chunk]


def read_column(rd: BodyReader, count: int, what: str) -> U64:
    """Inverse of ``write_column`` for ``count`` values; KeyframeDecodeError if the chunk
    is corrupt or holds another number of values."""
    size = rd.u32(f"{what} length")
    chunk = rd.take(size, what)
    if count == 0:
        if size:
            raise KeyframeDecodeError(f"corrupt {what}: {size} bytes for no values")
        return np.zeros(0, np.uint64)
    return _decompress(chunk, count, what).view(np.uint64)


ENTROPY: Final = EntropyStream()
ENTROPY_LOOKBACK: Final = EntropyStream(lookback=True)
