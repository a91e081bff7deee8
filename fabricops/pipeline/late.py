"""Late frames: a frame for a window that was already written is merged into it.

Frames reach the pipeline late after a broker outage (a producer resends its
buffer) or reordered between partitions. A frame is a duplicate only when its
identity, (device, source, ts_ns), is already stored with every sample it
gives; otherwise it is kept, whatever came before it (a part of a stored
instant is joined to it when the block is built). ``correct_windows`` takes the late
frames of closed windows, reads what the store holds of each window
(``held_windows``: its segment, and the times a merged segment covering it
holds), and writes the window again with the new frames in it (one
transaction per window: the old segment goes, the corrected segment comes; a
merged segment stays, and the window's segment holds only what it lacks).
Points already held are left as they are.

Late frames are stored but never stepped through their stream: the events a
late frame would have raised are not raised (their rates would be computed
against a newer sample).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from fabricops.core.frame import Frame, Source
from fabricops.core.frame_join import adds_samples
from fabricops.pipeline.keyframe import SeriesBlock, decode_block
from fabricops.pipeline.segment_merge import MAX_SPAN_S
from fabricops.store.records import SegmentRecord
from fabricops.store.store import Store

WindowKey = tuple[str, str, int]  # device, source, window index
PREFETCH: Final = 64
"""Complete windows whose stored segments the writer reads in one statement (it reads
ahead of the windows it writes: a statement each was a fifth of a small device's
window write)."""


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


@dataclass
class Held:
    """What the store holds of one stream's window: ``within``, the frames of the
    segments that lie in it (a window write replaces them), by ts_ns; ``covered``,
    the times in it that segments reaching outside it hold (merged segments, which a
    window write leaves as they are)."""

    within: dict[int, Frame]
    covered: set[int]

    def to_write(self, frames: Iterable[Frame]) -> list[Frame]:
        """``frames`` (what the window holds first, then what it gets: the parts of an
        instant are joined in that order when the block is built), oldest first, as
        the window's own segment is written: without the new ones whose times a segment
        outside the window holds, and without covered times before its first uncovered
        one. So a window written again has more points than before or another start (a
        merge relies on that to see the change), and its key (start, first sequence
        number) is never that of a segment outside the window, which starts at a covered
        time or before the window."""
        rows = sorted((f for f in frames if f.ts_ns in self.within or f.ts_ns not in self.covered),
                      key=lambda f: f.ts_ns)
        lead = next((i for i, f in enumerate(rows) if f.ts_ns not in self.covered), len(rows))
        return rows[lead:]


def held_windows(store: Store, windows: Sequence[WindowKey], window_ns: int
                 ) -> dict[WindowKey, Held]:
    """What the store holds of each window (see ``Held``), from the segments that may
    reach into it (the longest starts ``MAX_SPAN_S`` plus a window before it): one
    statement for the windows of one index."""
    by_index: dict[int, list[tuple[str, str]]] = {}
    for device, source, index in windows:
        by_index.setdefault(index, []).append((device, source))
    out: dict[WindowKey, Held] = {}
    for index, streams in by_index.items():
        t0, t1 = index * window_ns, (index + 1) * window_ns
        found = store.streams_window_segments(streams, t0_ns=t0, t1_ns=t1,
                                              reach_ns=_reach(t0, t1))
        for device, source in streams:
            out[(device, source, index)] = _held(found.get((device, source), []), device,
                                                 source, t0, t1)
    return out


def _reach(t0_ns: int, t1_ns: int) -> int:
    return round(MAX_SPAN_S * 1e9) + (t1_ns - t0_ns)


def _held(segments: Sequence[SegmentRecord], device: str, source: str, t0_ns: int,
          t1_ns: int) -> Held:
    held = Held({}, set())
    for seg in segments:
        block = decode_block(seg.payload)
        if t0_ns <= seg.t_start_ns and seg.t_end_ns < t1_ns:
            for f in frames_of_block(block, device, Source(source),
                                     [seg.first_seq] * seg.n_points):
                held.within.setdefault(f.ts_ns, f)
        else:
            ts = block.ts_ns
            held.covered.update(ts[(ts >= t0_ns) & (ts < t1_ns)].tolist())
    return held


def correct_windows(store: Store, late: Sequence[Frame], window_ns: int,
                    segment_of: Callable[[str, str, list[Frame]], SegmentRecord]) -> Correction:
    """Merge ``late`` frames into their stored windows (see the module docstring); a
    window a merged segment covers gets a segment of its own beside it, with the frames
    the merged one lacks."""
    groups: dict[WindowKey, list[Frame]] = {}
    for frame in late:
        groups.setdefault((frame.device, frame.source.value, frame.ts_ns // window_ns),
                          []).append(frame)
    done = Correction()
    held = held_windows(store, list(groups), window_ns)
    for (device, source, index), frames in sorted(groups.items()):
        t0, t1 = index * window_ns, (index + 1) * window_ns
        have = held[(device, source, index)]
        new: list[Frame] = []
        instants: dict[int, list[Frame]] = {}  # the frames of each time: held, then new
        for f in frames:
            instant = instants.setdefault(f.ts_ns, [have.within[f.ts_ns]]
                                          if f.ts_ns in have.within else [])
            if f.ts_ns in have.covered or (instant and not adds_samples(instant, f)):
                done.duplicates += 1
            else:  # a new time, or a part of a held instant (the block joins them)
                instant.append(f)
                new.append(f)
        if not new:
            continue
        rows = have.to_write([*have.within.values(), *new])
        store.close_window([segment_of(device, source, rows)], device=device, source=source,
                           before_ts_ns=t1, window=(t0, t1))
        done.stored += len(new)
        done.windows += 1
    return done
