"""The counter section of keyframe format version 3.

Layout (little-endian)::

    reference table (keyframe_refs) | keyframes: length u32 | pcodec chunk |
    stream(rows) (keyframe_entropy, lookback groups) | corrections (keyframe_norm)

Rows are the block's counters, absent points filled. Writing:

1. each row may take a sibling counter of its entity as its reference
   (:mod:`.keyframe_refs`): packets from octets;
2. the keyframes go in one pcodec chunk (``keyframe_entropy.write_column``):
   counters since boot have any magnitude, which pcodec's bins fit better
   than byte planes do;
3. every row takes its cheapest residual mode, and then the section's
   rate-mode rows are coded together as rates per nominal interval
   (:mod:`.keyframe_norm`) if that makes them smaller as a whole (some rows
   may cost more so, others less);
4. the corrections of the rows coded as rates.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricops.pipeline import keyframe_modes as km
from fabricops.pipeline import keyframe_norm as kn
from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline import keyframe_refs as kr
from fabricops.pipeline.keyframe_entropy import EntropyStream, read_column, write_column
from fabricops.pipeline.keyframe_pack import U64
from fabricops.pipeline.keyframe_series import BodyReader

I64 = NDArray[np.int64]


def write(out: list[bytes], x: U64, entity: I64, ts_ns: I64, stream: EntropyStream
          ) -> Generator[kr.RefChoice | km.ModeChoice, Any, None]:
    """Append the section for counter rows ``x`` of entities ``entity`` (one per row); a
    writer of :mod:`.keyframe_batch` (it yields its choices of references and modes)."""
    refs: kr.References = yield kr.RefChoice(x, entity)
    kr.write(out, refs)
    x = kr.remove(x, refs)
    kf = x[:, 0]
    modes, e = yield km.ModeChoice(kp.offsets(x, kf), True, kp.rate_ratio(ts_ns))
    k, long = kn.scale(ts_ns)
    corr = np.zeros((0, int(long.sum())), np.int64)
    rate = np.flatnonzero(modes == kp.RATE_MODE)
    if len(rate):
        q, at_long, ok = kn.normalize(kp.differences(x[rate]), k, long)
        rows = rate[ok]
        fix: list[bytes] = []
        kn.write_corrections(fix, at_long[ok])
        as_rates = np.full(len(rows), kn.NORM_MODE, np.uint8)
        if len(rows) and (stream.size(as_rates, q[ok].view(np.uint64)) + sum(map(len, fix))
                          < stream.size(modes[rows], e[rows, 1:]) + 1):
            modes[rows], e[rows, 1:], corr = kn.NORM_MODE, q[ok].view(np.uint64), at_long[ok]
    write_column(out, kf)
    stream.write(out, modes, e[:, 1:])
    kn.write_corrections(out, corr)


def read(rd: BodyReader, r: int, n: int, ts_ns: I64, stream: EntropyStream) -> U64:
    """The ``r`` counter rows of ``n`` points that ``write`` laid out."""
    refs = kr.read(rd, r)
    kf = read_column(rd, r, "counter keyframes")
    modes, e = stream.read(rd, r, n - 1, "counter", allow_rate=True)
    k, long = kn.scale(ts_ns)
    corr = kn.read_corrections(rd, int((modes == kn.NORM_MODE).sum()), int(long.sum()))
    e, modes = kn.as_deltas(e, modes, k, long, corr)
    x = np.empty((r, n), np.uint64)
    x[:, 0] = kf
    x[:, 1:] = kp.integrate(e, modes, kp.rate_ratio(ts_ns)) + kf[:, None]
    return kr.restore(x, refs)
