"""Retention: old segments are downsampled, then dropped past the retention limit.

``compact(store, older_than_ns, step_s)`` rewrites every segment that ended
before ``older_than_ns`` at one point per ``step_s``; ``Store.prune`` drops
what is older than the store's retention. Both are idempotent.

``downsample(block, step_s)`` keeps one point per ``step_s`` (the last sample
of each step, so a counter's kept values are still its exact readings and its
rates over the coarser steps stay exact), and keeps every point where a state
changed, so each state change survives at its time. Gauges keep the sample at
each kept point, within the segment's bound as before.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fabricops.core.catalogue import CATALOGUE, MetricKind
from fabricops.pipeline.keyframe import (
    ENCODING,
    SeriesBlock,
    decode_block,
    encode_block,
    gauge_bounds,
)
from fabricops.store.store import Store

_STATE = np.array([CATALOGUE.by_id(i).kind is MetricKind.STATE if CATALOGUE.is_known[i]
                   else False for i in range(CATALOGUE.max_id + 1)])


def downsample(block: SeriesBlock, step_s: float) -> SeriesBlock:
    """One point per ``step_s`` (last of each step) plus every state change."""
    if step_s <= 0:
        raise ValueError(f"downsampling step must be positive, got {step_s} s")
    if block.n_points <= 1:
        return block
    step = np.floor_divide(block.ts_ns, round(step_s * 1e9))
    keep = np.append(step[1:] != step[:-1], True)
    states = _STATE[block.metric]
    if states.any():
        raw = block.raw[states]
        changed = (raw[:, 1:] != raw[:, :-1]) & block.present[states][:, 1:]
        keep[1:] |= changed.any(axis=0)
        keep[:-1] |= changed.any(axis=0)  # the last point before a change, too
    keep[0] = True
    return SeriesBlock(block.ts_ns[keep], block.entity, block.metric, block.raw[:, keep],
                       block.present[:, keep])


def compact(store: Store, *, older_than_ns: int, step_s: float) -> tuple[int, int]:
    """Downsample the segments that ended before ``older_than_ns``; (segments, points) saved."""
    rewritten, saved = [], 0
    for seg in store.segments(t0_ns=0, t1_ns=older_than_ns):
        if seg.t_end_ns >= older_than_ns:
            continue
        block = decode_block(seg.payload)
        small = downsample(block, step_s)
        if small.n_points == block.n_points:
            continue
        bounds = gauge_bounds(small.metric)
        rewritten.append(replace(seg, n_points=small.n_points, encoding=ENCODING,
                                 payload=encode_block(small, bounds)))
        saved += block.n_points - small.n_points
    store.replace_segments(rewritten)
    return len(rewritten), saved
