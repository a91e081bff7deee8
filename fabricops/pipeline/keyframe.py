"""The keyframe block codec: one device's series from one source over one window.

Three format versions share one header and body layout; the version byte says
how a section's residuals are stored (``stream(rows)`` below):

* version 3 (``kf3``, written by default): version 2 with another counter
  section (:mod:`.keyframe_counters`): a counter row may be coded from a
  sibling counter of its entity (packets from octets, :mod:`.keyframe_refs`),
  or as rates per nominal poll interval in chunks of their own (on/off traffic
  phases, :mod:`.keyframe_norm`), and the keyframes are a pcodec chunk;
* version 2 (``kf2``): residuals entropy-coded with pcodec, one chunk per group
  of rows of similar width, and an order-0 mode for gauges that are noise
  around a level (see :mod:`.keyframe_entropy`);
* version 1 (``kf1``): residuals bit packed per row (see :mod:`.keyframe_pack`).

Blocks of every version decode; ``encode_block(..., version=N)`` still writes
an older one. The rest of this docstring describes version 1; version 2 differs
in ``stream(rows)``, version 3 also in the counter section.

A ``SeriesBlock`` holds ``n_series`` series of ``n_points`` samples sharing one
timestamp column. The first point of each series is its keyframe (full value);
after it only what changed is stored:

* counters: residuals of the delta-of-delta in wrapping uint64 arithmetic (or,
  chosen per series, plain deltas or a lagged delta-of-delta ``d[i] - d[i-P]``
  for series that repeat with a training job's iteration period), so wraps and
  resets round-trip bit-exact;
* gauges: quantized to steps of ``2 * bound`` (``|decoded - original| <=
  bound``), then coded like counters; a bound of 0 keeps the exact float bits
  (XOR with the previous value). NaN, inf and values the step cannot reach are
  exceptions stored exactly;
* states: the position and value of each change;
* timestamps: delta-of-delta of ``ts_ns``.

Residuals are divided by their series' common divisor, zigzagged and packed at
the series' minimal width: 0, 1, 2 or 4 bits, or 1..8 byte planes (see
:mod:`.keyframe_pack`). Absent points (``present`` False) repeat the previous
value before coding (leading ones the first present value) and decode as 0.

Payload (little-endian throughout)::

    header, 26 bytes: magic b"FOKF" | version u8 (1, 2 or 3) | flags u8 (bit 0: every point
        present) | n_series u32 | n_points u32 | body length u32 | zstd length u32 |
        CRC-32 (zlib) of the 22 bytes before it
    zstd frame (with checksum) of the body:
      timestamps   keyframe u64 planes | stream(1 row)
      names        n_entities u32 | name lengths u32[] | UTF-8 names (<= 1024 B each) |
                   entity index u32[n_series] | metric u16[n_series] |
                   kind u8[n_series] (0 counter, 1 gauge, 2 state)
      presence     np.packbits(present), row-major (absent when flag bit 0 is set)
      counters     keyframes u64 planes | stream(rows)
                   [version 3: see keyframe_counters]
      gauges       bounds f64[] | keyframes u64 planes (zigzag steps, or bits) |
                   stream(rows) | n_exceptions u32 | position deltas u32[] | bits planes
      states       keyframes u64 planes | n_changes u32 | position deltas u32[] |
                   value planes
    stream(rows) = mode u8[rows] | divisor u64 planes | width code u8[rows] |
                   packed residuals of points 1.. (see keyframe_pack)

Counter, gauge and state rows are the block's series of that kind, in block
order; positions are flat indices into that kind's ``(rows, n_points)`` matrix.
"""

from __future__ import annotations

import itertools
import struct
import threading
import zlib
from collections.abc import Sequence
from functools import lru_cache
from typing import Final

import numpy as np
import zstandard
from numpy.typing import NDArray

from fabricops.core.catalogue import CATALOGUE, Catalogue, MetricKind
from fabricops.pipeline import keyframe_counters as kc
from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline import keyframe_series as ks
from fabricops.pipeline.keyframe_batch import Work, settle, settle_all
from fabricops.pipeline.keyframe_block import (
    MAX_POINTS,
    MAX_SAMPLES,
    SeriesBlock,
    block_from_frames,
    default_gauge_bound,
    gauge_bounds,
)
from fabricops.pipeline.keyframe_entropy import ENTROPY, ENTROPY_LOOKBACK
from fabricops.pipeline.keyframe_pack import KeyframeDecodeError, KeyframeError

__all__ = ["ENCODING", "ENCODINGS", "KeyframeDecodeError", "KeyframeError", "SeriesBlock",
           "block_from_frames", "decode_block", "default_gauge_bound", "encode_block",
           "encode_blocks", "gauge_bounds"]

ENCODING: Final = "kf3"
"""The name of what ``encode_block`` writes by default, for the store's ``encoding``."""
ENCODINGS: Final = {1: "kf1", 2: "kf2", 3: "kf3"}
MAGIC: Final = b"FOKF"
VERSION: Final = 3
STREAMS: Final[dict[int, ks.ResidualStream]] = {1: ks.PACKED, 2: ENTROPY, 3: ENTROPY_LOOKBACK}
COUNTER_SECTION_3: Final = 3
"""The first version whose counter section is :mod:`.keyframe_counters`."""
FLAG_ALL_PRESENT: Final = 1
MAX_BOUND: Final = 2.0**1000
MAX_NAME_BYTES: Final = 1024
_HEADER: Final = struct.Struct("<4sBBIIII")
_CRC: Final = struct.Struct("<I")
HEADER_SIZE: Final = _HEADER.size + _CRC.size
KIND_CODES: Final = {MetricKind.COUNTER: 0, MetricKind.GAUGE: 1, MetricKind.STATE: 2}
_MALFORMED = (ValueError, IndexError, TypeError, OverflowError, MemoryError, struct.error,
              zstandard.ZstdError)


@lru_cache(maxsize=4)
def _kind_table(catalogue: Catalogue) -> NDArray[np.uint8]:
    """Indexed by metric id: the kind code, 255 for ids the catalogue does not define."""
    table = np.full(catalogue.max_id + 1, 255, np.uint8)
    for m in catalogue.metrics:
        table[m.id] = KIND_CODES[m.kind]
    table.flags.writeable = False
    return table


def _catalogue_kinds(metric: NDArray[np.uint16], catalogue: Catalogue) -> NDArray[np.uint8]:
    table = _kind_table(catalogue)
    ids = metric.astype(np.int64)
    kinds: NDArray[np.uint8] = np.full(len(ids), 255, np.uint8)
    inside = ids < len(table)
    kinds[inside] = table[ids[inside]]
    return kinds


def _kinds(metric: NDArray[np.uint16], catalogue: Catalogue) -> NDArray[np.uint8]:
    kinds = _catalogue_kinds(metric, catalogue)
    unknown = np.flatnonzero(kinds == 255)
    if len(unknown):
        i = int(unknown[0])
        raise KeyframeError(f"series #{i}: metric id {metric[i]} is not in the catalogue")
    return kinds


def _bounds(gauge_bound: NDArray[np.float64] | float, n_series: int) -> NDArray[np.float64]:
    try:
        bound = np.asarray(gauge_bound, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise KeyframeError(f"gauge_bound is not a number or array of numbers: {exc}") from None
    if bound.ndim == 0:
        bound = np.full(n_series, bound)
    if bound.shape != (n_series,):
        raise KeyframeError(f"gauge_bound has shape {bound.shape}: give a scalar or one "
                            f"bound per series ({n_series})")
    bad = np.flatnonzero(~(np.isfinite(bound) & (bound >= 0) & (bound <= MAX_BOUND)))
    if len(bad):
        raise KeyframeError(f"gauge bound {float(bound[bad[0]])!r} (series #{bad[0]}) must be "
                            "finite, >= 0 and at most 2**1000")
    return np.ascontiguousarray(bound)


_local = threading.local()


def _compressor(level: int) -> zstandard.ZstdCompressor:
    cache: dict[int, zstandard.ZstdCompressor] = _local.__dict__.setdefault("c", {})
    if level not in cache:
        cache[level] = zstandard.ZstdCompressor(level=level, write_checksum=True)
    return cache[level]


def _decompressor() -> zstandard.ZstdDecompressor:
    if not hasattr(_local, "d"):
        _local.d = zstandard.ZstdDecompressor()
    d: zstandard.ZstdDecompressor = _local.d
    return d


def encode_block(block: SeriesBlock, gauge_bound: NDArray[np.float64] | float,
                 catalogue: Catalogue = CATALOGUE, level: int = 3,
                 version: int = VERSION) -> bytes:
    """Encode ``block`` as a payload of format ``version`` (``level`` is the zstd level).

    ``gauge_bound`` is the absolute error allowed on gauges, a scalar or one per
    series (ignored for counters and states): finite, >= 0 and at most 2**1000; 0
    keeps the exact float bits. KeyframeError for a bad bound, an unknown metric or
    an unknown version.
    """
    return settle(_encode(block, gauge_bound, catalogue, level, version))


def encode_blocks(blocks: Sequence[SeriesBlock],
                  gauge_bounds: Sequence[NDArray[np.float64] | float],
                  catalogue: Catalogue = CATALOGUE, level: int = 3,
                  version: int = VERSION) -> list[bytes]:
    """``encode_block`` of each block with its bound: the same payloads, encoded
    together (:mod:`.keyframe_batch`; many small blocks take a fraction of the array
    passes). A block ``encode_block`` refuses fails them all, with its KeyframeError
    (of one of them, if several are bad)."""
    return settle_all([_encode(block, bound, catalogue, level, version)
                       for block, bound in zip(blocks, gauge_bounds, strict=True)])


def _encode(block: SeriesBlock, gauge_bound: NDArray[np.float64] | float,
            catalogue: Catalogue, level: int, version: int) -> Work[bytes]:
    """The writer of ``encode_block``'s payload (it yields its mode and reference
    choices)."""
    if version not in STREAMS:
        raise KeyframeError(f"unknown format version {version}: use one of {sorted(STREAMS)}")
    stream = STREAMS[version]
    kinds = _kinds(block.metric, catalogue)
    bound = _bounds(gauge_bound, block.n_series)
    parts: list[bytes] = []
    yield from ks.write_integers(parts, block.ts_ns.view(np.uint64)[None, :], stream)
    entity = _write_names(parts, block, kinds)
    all_present = bool(block.present.all())
    if not all_present:
        parts.append(np.packbits(block.present).tobytes())
    counters, gauges, states = _rows_by_kind(kinds)
    yield from _write_counters(parts, block, counters, entity, version)
    yield from ks.write_gauges(parts, block.raw[gauges], block.present[gauges],
                               bound[gauges], stream)
    ks.write_states(parts, block.raw[states], block.present[states])
    body = b"".join(parts)
    packed = _compressor(level).compress(body)
    head = _HEADER.pack(MAGIC, version, FLAG_ALL_PRESENT if all_present else 0,
                        block.n_series, block.n_points, len(body), len(packed))
    return head + _CRC.pack(zlib.crc32(head)) + packed


def _rows_by_kind(kinds: NDArray[np.uint8]) -> list[NDArray[np.intp]]:
    return [np.flatnonzero(kinds == code) for code in range(3)]


def _write_counters(out: list[bytes], block: SeriesBlock, rows: NDArray[np.intp],
                    entity: NDArray[np.uint32], version: int) -> Work[None]:
    x = ks.ffill(block.raw[rows], block.present[rows])
    if version >= COUNTER_SECTION_3:
        yield from kc.write(out, x, entity[rows].astype(np.int64), block.ts_ns,
                            ENTROPY_LOOKBACK)
    else:
        yield from ks.write_integers(out, x, STREAMS[version], kp.rate_ratio(block.ts_ns))


def _read_counters(rd: ks.BodyReader, rows: int, n_points: int, ts: NDArray[np.int64],
                   version: int) -> kp.U64:
    if version >= COUNTER_SECTION_3:
        return kc.read(rd, rows, n_points, ts, ENTROPY_LOOKBACK)
    return ks.read_integers(rd, rows, n_points, "counter", STREAMS[version], kp.rate_ratio(ts))


def _write_names(out: list[bytes], block: SeriesBlock, kinds: NDArray[np.uint8]
                 ) -> NDArray[np.uint32]:
    """Append the names section; return each series' entity index."""
    table = {e: i for i, e in enumerate(dict.fromkeys(block.entity))}
    encoded = [e.encode() for e in table]
    long = [e for e in encoded if len(e) > MAX_NAME_BYTES]
    if long:
        raise KeyframeError(f"entity name {long[0][:40]!r}... is longer than "
                            f"{MAX_NAME_BYTES} bytes")
    idx = np.fromiter(map(table.__getitem__, block.entity), np.uint32, len(block.entity))
    out += [np.uint32(len(encoded)).tobytes(),
            np.array([len(e) for e in encoded], "<u4").tobytes(), b"".join(encoded),
            idx.astype("<u4").tobytes(), block.metric.astype("<u2").tobytes(), kinds.tobytes()]
    return idx


def decode_block(payload: bytes, catalogue: Catalogue = CATALOGUE) -> SeriesBlock:
    """Decode a payload of any known version; KeyframeDecodeError names what is wrong."""
    try:
        return _decode(bytes(payload), catalogue)
    except KeyframeDecodeError:
        raise
    except _MALFORMED as exc:
        raise KeyframeDecodeError(f"malformed payload: {exc}") from exc


def _decode(payload: bytes, catalogue: Catalogue) -> SeriesBlock:
    version, n_series, n_points, flags, body = _open(payload)
    stream = STREAMS[version]
    rd = ks.BodyReader(body)
    ts = ks.read_integers(rd, 1, n_points, "timestamp", stream)[0].view(np.int64)
    if (np.diff(ts) <= 0).any():  # before the sections, whose coding depends on them
        raise KeyframeDecodeError("corrupt timestamps: not strictly increasing")
    entity, metric, kinds = _read_names(rd, n_series, catalogue)
    present = _read_presence(rd, n_series, n_points, bool(flags & FLAG_ALL_PRESENT))
    raw = np.empty((n_series, n_points), np.uint64)
    counters, gauges, states = _rows_by_kind(kinds)
    raw[counters] = _read_counters(rd, len(counters), n_points, ts, version)
    raw[gauges] = ks.read_gauges(rd, len(gauges), n_points, stream)
    raw[states] = ks.read_states(rd, len(states), n_points)
    rd.done()
    raw[~present] = 0
    return SeriesBlock(ts, entity, metric, raw, present)


def _read_presence(rd: ks.BodyReader, n_series: int, n_points: int,
                   all_present: bool) -> NDArray[np.bool_]:
    if all_present:
        return np.ones((n_series, n_points), bool)
    size = n_series * n_points
    bits = np.asarray(rd.array("u1", -(-size // 8), "presence"), np.uint8)
    return np.unpackbits(bits, count=size).view(bool).reshape(n_series, n_points)


def _open(payload: bytes) -> tuple[int, int, int, int, bytes]:
    """Check the header; return the version, counts, flags and decompressed body."""
    if len(payload) < HEADER_SIZE:
        raise KeyframeDecodeError(
            f"truncated header: {len(payload)} bytes, a keyframe header has {HEADER_SIZE}")
    magic, version, flags, n_series, n_points, body_len, zlen = _HEADER.unpack_from(payload)
    if magic != MAGIC:
        raise KeyframeDecodeError(f"bad magic {magic!r}: not a keyframe payload")
    if version not in STREAMS:
        raise KeyframeDecodeError(
            f"unknown version {version} (this decoder reads {sorted(STREAMS)})")
    if zlib.crc32(payload[:_HEADER.size]) != _CRC.unpack_from(payload, _HEADER.size)[0]:
        raise KeyframeDecodeError("header checksum mismatch")
    if flags & ~FLAG_ALL_PRESENT:
        raise KeyframeDecodeError(f"unknown flags 0x{flags:02x}")
    if not 1 <= n_points <= MAX_POINTS or n_series * n_points > MAX_SAMPLES:
        raise KeyframeDecodeError(f"bad counts: {n_series} series x {n_points} points")
    if body_len > _max_body(n_series, n_points):
        raise KeyframeDecodeError(f"bad counts: a {body_len}-byte body for {n_series} "
                                  f"series x {n_points} points")
    have = len(payload) - HEADER_SIZE
    if have < zlen:
        raise KeyframeDecodeError(f"truncated body: {have} of {zlen} compressed bytes")
    if have > zlen:
        raise KeyframeDecodeError(f"length mismatch: {have - zlen} bytes after the body")
    frame = payload[HEADER_SIZE:]
    if zstandard.frame_content_size(frame) != body_len:
        raise KeyframeDecodeError(f"length mismatch: the body is not {body_len} bytes")
    body = _decompressor().decompress(frame, allow_extra_data=False)
    return version, n_series, n_points, flags, body


def _max_body(n_series: int, n_points: int) -> int:
    """The largest body a block of these counts can have (see the module docstring);
    the margin covers the chunk headers of up to 45 chunks (11 groups for the
    timestamps and for the gauges; for the counters 11, in version 3 22 with the
    rate groups, and the keyframes) and version 3's reference table."""
    per_sample, per_series = 8 + 4 + 8 + 1, 45 + 12 + MAX_NAME_BYTES
    return (per_sample * n_series * n_points + per_series * n_series + 26 * n_points
            + 256 + 45 * 4096)


def _read_names(rd: ks.BodyReader, n_series: int, catalogue: Catalogue) -> tuple[
        tuple[str, ...], NDArray[np.uint16], NDArray[np.uint8]]:
    n_entities = rd.u32("entity count")
    lengths = rd.array("<u4", n_entities, "entity name lengths").astype(np.int64)
    blob = bytes(rd.take(int(lengths.sum()), "entity names"))
    bounds = [0, *np.cumsum(lengths).tolist()]
    names = [blob[a:b].decode() for a, b in itertools.pairwise(bounds)]
    idx = rd.array("<u4", n_series, "entity index").astype(np.int64)
    if n_series and int(idx.max()) >= n_entities:
        raise KeyframeDecodeError(f"corrupt entity index: {int(idx.max())} >= {n_entities}")
    metric = rd.array("<u2", n_series, "metric ids").astype(np.uint16)
    kinds = np.asarray(rd.array("u1", n_series, "kinds"), np.uint8)
    if n_series and int(kinds.max()) > 2:
        raise KeyframeDecodeError(f"corrupt kinds: code {int(kinds.max())}")
    _check_kinds(metric, kinds, catalogue)
    return tuple(map(names.__getitem__, idx.tolist())), metric, kinds


def _check_kinds(metric: NDArray[np.uint16], kinds: NDArray[np.uint8],
                 catalogue: Catalogue) -> None:
    """A metric the catalogue knows must be stored with its catalogue kind."""
    want = _catalogue_kinds(metric, catalogue)
    bad = np.flatnonzero((want != 255) & (want != kinds))
    if len(bad):
        i = int(bad[0])
        raise KeyframeDecodeError(f"corrupt kinds: metric id {metric[i]} is stored as kind "
                                  f"{kinds[i]}, the catalogue says {want[i]}")
