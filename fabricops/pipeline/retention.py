"""Retention: old segments are downsampled, then dropped past the retention limit.

``downsample(block, step_s)`` keeps one point per ``step_s`` (the last sample
of each step, so a counter's kept values are still its exact readings and its
rates over the coarser steps stay exact), and keeps every point where a state
changed, so each state change survives at its time. Gauges keep the sample at
each kept point, within the segment's bound as before.
"""

from __future__ import annotations

import numpy as np

from fabricops.core.catalogue import CATALOGUE, MetricKind
from fabricops.pipeline.keyframe import SeriesBlock

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
