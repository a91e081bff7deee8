"""Late frames: a frame for a window that was already written is merged into it.

Frames reach the pipeline late after a broker outage (a producer resends its
buffer) or reordered between partitions. A frame is a duplicate only when its
identity, (device, source, ts_ns), is already stored; otherwise it is kept,
whatever came before it. ``correct_windows`` takes the late frames of closed
windows, reads what the store holds of each window (``held_frames``: its
segment, or the merged segment that covers it), and writes the window again
with the new frames in it (one transaction per window: the old segment goes,
the corrected segment comes).
Points already held are left as they are.

Late frames are stored but never stepped through their stream: the events a
late frame would have raised are not raised (their rates would be computed
against a newer sample).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fabricops.core.frame import Frame, Source
from fabricops.pipeline.keyframe import SeriesBlock, decode_block
from fabricops.store.records import SegmentRecord
from fabricops.store.store import Store

WindowKey = tuple[str, str, int]  # device, source, window index


@dataclass
class Correction:
    """What ``correct_windows`` did: frames stored, duplicates found, windows written."""

    stored: int = 0
    duplicates: int = 0
    windows: int = 0


def frames_of_block(block: SeriesBlock, device: str, source: Source,
                    seqs: Sequence[int] | None = None) -> list[Frame]:
    """The frames a block was built from (present samples only), oldest first."""
    names = sorted(set(block.entity))
    index = {name: i for i, name in enumerate(names)}
    ent = np.array([index[e] for e in block.entity], np.uint32)
    out = []
    for t, ts in enumerate(block.ts_ns.tolist()):
        rows = np.flatnonzero(block.present[:, t])
        seq = 0 if seqs is None else seqs[t]
        out.append(Frame(device, int(ts), source, seq, tuple(names), ent[rows],
                         block.metric[rows], block.raw[rows, t]))
    return out


def held_frames(store: Store, device: str, source: str, t0_ns: int,
                t1_ns: int) -> tuple[tuple[int, int], dict[int, Frame]]:
    """What the store holds of one stream's window [t0_ns, t1_ns): the span to write it
    back as, and the frames of the segments that start in that span, by ts_ns (a
    segment's first). The span is the window, widened to a merged segment
    (``segment_merge``) that covers part of it."""
    found, before = store.window_segments(device=device, source=source, t0_ns=t0_ns,
                                          t1_ns=t1_ns)
    span = (t0_ns, t1_ns)
    segments: list[SegmentRecord] | None = found
    if before is not None and before[1] >= t0_ns:  # a merged segment covers its start
        span, segments = (before[0], t1_ns), None
    while True:
        if segments is None:
            segments = store.segments_starting(device=device, source=source,
                                               t0_ns=span[0], t1_ns=span[1])
        end = max([span[1], *(s.t_end_ns + 1 for s in segments)])
        if end == span[1]:
            break
        span, segments = (span[0], end), None
    held: dict[int, Frame] = {}
    for seg in segments:
        for f in frames_of_block(decode_block(seg.payload), device, Source(source),
                                 [seg.first_seq] * seg.n_points):
            held.setdefault(f.ts_ns, f)
    return span, held


def correct_windows(store: Store, late: Sequence[Frame], window_ns: int,
                    segment_of: Callable[[str, str, list[Frame]], SegmentRecord]) -> Correction:
    """Merge ``late`` frames into their stored windows (see the module docstring)."""
    groups: dict[WindowKey, list[Frame]] = {}
    for frame in late:
        groups.setdefault((frame.device, frame.source.value, frame.ts_ns // window_ns),
                          []).append(frame)
    done = Correction()
    for (device, source, index), frames in sorted(groups.items()):
        span, have = held_frames(store, device, source, index * window_ns,
                                 (index + 1) * window_ns)
        new = {}
        for f in frames:
            if f.ts_ns in have or f.ts_ns in new:
                done.duplicates += 1
            else:
                new[f.ts_ns] = f
        if not new:
            continue
        merged = sorted([*have.values(), *new.values()], key=lambda f: f.ts_ns)
        store.close_window([segment_of(device, source, merged)], device=device, source=source,
                           before_ts_ns=span[1], window=span)
        done.stored += len(new)
        done.windows += 1
    return done
