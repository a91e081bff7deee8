"""Merging old segments: a stream's one-minute segments become one per span.

The pipeline writes one segment per window (a minute by default), and each
segment must decode on its own, so each carries its own keyframes (a counter's
full value, up to 8 bytes a series), names and timestamps head. Once no late
frame is expected, ``merge_segments`` rewrites each stream's segments of one
aligned span (``span_s``, ten minutes by default) as a single segment: the
same points, a tenth of the keyframes and rows. On the noisy bench set that
is 0.575 to 0.497 bytes a sample (``bench/bench_compression.py``, ten blocks
merged); merging costs a decode and an encode, about 0.2 us of CPU a sample.

Contract:

* The points stay the same: counters and states bit for bit, gauges as they
  were decoded (a gauge's decoded value lies on its bound's grid, and coding
  it again with the same bound gives it back exactly). Read before and after,
  a series is identical.
* A span is merged once it ended before the cutoff, and only if it has more
  than one segment. Segments that overlap (a window written beside a merged
  segment) merge into the union of their samples.
* Each span is replaced in a transaction of its own, and only if its segments
  are still stored as they were read (``Store.merge_segments``): a frame
  written meanwhile makes the merge skip that span, never lose the frame.
* A window write never deletes a merged segment. A late frame for a merged
  span is written in a segment of its own beside it, holding what the merged
  one lacks (``late.held_windows``); the next run folds it in.
* A span that cannot be merged (a segment that does not decode, too many
  samples for one segment, a busy database) is left as it is, and counted.
* Idempotent: a span already merged is one segment and is left as it is.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fabricops.pipeline.keyframe import ENCODING, SeriesBlock, decode_block, encode_block
from fabricops.pipeline.keyframe_block import MAX_POINTS, MAX_SAMPLES, gauge_bounds
from fabricops.pipeline.keyframe_pack import KeyframeDecodeError, KeyframeError
from fabricops.store.records import SegmentHead, SegmentMerge, SegmentRecord
from fabricops.store.store import Store, StoreError

S: Final = 1_000_000_000
MAX_SPAN_S: Final = 3600.0
"""The longest span a merge makes. Spans divide it and are aligned to it, so whatever
spans runs use, a merged segment starts within one hour and ends within it or one
window past it: at most this plus one window before any time it holds (a window write
looks that far back)."""


class MergeConfig(BaseModel):
    """How old segments are merged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    span_s: float = Field(default=600.0, ge=1.0, le=MAX_SPAN_S,
                          description="one segment per stream and aligned span of this "
                                      "length, which divides an hour (so a merged segment "
                                      "stays within an hour, and a window past it)")
    lookback_s: float = Field(default=86_400.0, gt=0,
                              description="merge spans that start at most this long before "
                                          "the cutoff (a run does not reread all history)")
    batch: int = Field(default=64, ge=1, description="spans prepared before they are written")

    @field_validator("span_s")
    @classmethod
    def _divides_an_hour(cls, v: float) -> float:
        if not divides_an_hour(v):
            raise ValueError(f"{v:g} s does not divide an hour (1m, 5m, 10m, 15m, 30m, 1h...)")
        return v


def divides_an_hour(span_s: float) -> bool:
    """True if spans of ``span_s`` cut an hour into whole spans, in whole ns as spans are
    cut (3600/13 s does not)."""
    return round(MAX_SPAN_S * S) % round(span_s * S) == 0


@dataclass
class MergeResult:
    """What ``merge_segments`` did."""

    spans: int = 0
    segments_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    points: int = 0
    samples: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str, n: int = 1) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + n


def merge_blocks(blocks: Sequence[SeriesBlock]) -> SeriesBlock:
    """One block holding the points of ``blocks``: the union of their series, in order
    of first appearance, and of their times. A series is absent where no block has it;
    where blocks overlap (two writers left copies of the same frames), the first block
    that has a sample keeps it. ValueError if there is no block."""
    if not blocks:
        raise ValueError("no block to merge")
    index: dict[tuple[str, int], int] = {}
    rows_of = []
    for block in blocks:
        pairs = zip(block.entity, block.metric.tolist(), strict=True)
        rows_of.append(np.array([index.setdefault(k, len(index)) for k in pairs], np.intp))
    ts = np.concatenate([b.ts_ns for b in blocks])
    apart = bool((ts[1:] > ts[:-1]).all())  # the usual case: one after the other
    ts = ts if apart else np.unique(ts)
    raw = np.zeros((len(index), len(ts)), np.uint64)
    present = np.zeros((len(index), len(ts)), bool)
    start = 0
    for block, rows in zip(blocks, rows_of, strict=True):
        if apart:
            end = start + block.n_points
            raw[rows, start:end], present[rows, start:end] = block.raw, block.present
            start = end
            continue
        at = np.searchsorted(ts, block.ts_ns)
        r, c = np.nonzero(block.present & ~present[np.ix_(rows, at)])
        raw[rows[r], at[c]] = block.raw[r, c]
        present[rows[r], at[c]] = True
    keys = list(index)
    return SeriesBlock(ts, tuple(k[0] for k in keys),
                       np.array([k[1] for k in keys], np.uint16), raw, present)


def merged_segment(segments: Sequence[SegmentRecord]) -> tuple[SegmentRecord, int]:
    """The segment that holds the points of ``segments`` (one stream, in time order),
    and how many samples it holds."""
    block = merge_blocks([decode_block(s.payload) for s in segments])
    bounds = gauge_bounds(block.metric)
    first = segments[0]
    return SegmentRecord(
        device=first.device, source=first.source, t_start_ns=int(block.ts_ns[0]),
        t_end_ns=int(block.ts_ns[-1]), first_seq=min(s.first_seq for s in segments),
        last_seq=max(s.last_seq for s in segments), n_points=block.n_points,
        n_series=block.n_series, encoding=ENCODING,
        max_error=float(bounds.max(initial=0.0)), payload=encode_block(block, bounds)), \
        int(block.present.sum())


def spans(heads: Iterable[SegmentHead], span_ns: int) -> list[list[SegmentHead]]:
    """One stream's segments (in time order, as ``Store.segment_heads`` gives them)
    grouped by the aligned span of their start (the last may end past the span:
    windows that do not divide it)."""
    return [list(g) for _, g in itertools.groupby(heads, lambda h: h.t_start_ns // span_ns)]


def _mergeable(group: list[SegmentHead], result: MergeResult) -> bool:
    if len(group) < 2:
        return False
    points = sum(h.n_points for h in group)
    if points > MAX_POINTS or points * max(h.n_series for h in group) > MAX_SAMPLES:
        result.skip("too many samples for one segment")
        return False
    return True


def _fetch(store: Store, group: list[SegmentHead]) -> list[SegmentRecord] | None:
    """The segments of ``group`` with their payloads; None if they changed since."""
    first = group[0]
    found = store.segments_starting(device=first.device, source=first.source,
                                    t0_ns=first.t_start_ns, t1_ns=group[-1].t_start_ns + 1)
    same = [(s.t_start_ns, s.first_seq, s.n_points) for s in found] == \
        [(h.t_start_ns, h.first_seq, h.n_points) for h in group]
    return found if same else None


def merge_segments(store: Store, *, older_than_ns: int = 2**63 - 1, age_ns: int = 0,
                   config: MergeConfig | None = None,
                   progress: Callable[[int, int], None] | None = None,
                   stop: Callable[[], bool] | None = None,
                   only: Collection[tuple[str, str]] | None = None,
                   watermarks: Mapping[tuple[str, str], int] | None = None) -> MergeResult:
    """Merge, stream by stream, the spans that ended before ``older_than_ns`` and
    ``age_ns`` before the stream's own newest segment end (a stream that lags keeps its
    recent windows), looking back ``config.lookback_s`` (see the module docstring).
    ``progress(streams done, streams)`` is called after each stream; once ``stop()`` is
    true, the spans prepared are written and the run ends (the rest waits for the next
    one). ``only``: just these (device, source) streams. ``watermarks``: the store's
    ``segment_watermarks``, if the caller has read them. Memory holds one stream's
    segment heads and ``config.batch`` spans."""
    config = config or MergeConfig()
    span_ns = round(config.span_s * S)
    result = MergeResult()
    marks = store.segment_watermarks() if watermarks is None else watermarks
    streams = sorted(item for item in marks.items() if only is None or item[0] in only)
    pending: list[tuple[SegmentMerge, int]] = []
    for done, ((device, source), newest) in enumerate(streams, 1):
        if stop is not None and stop():
            break
        cutoff = min(older_than_ns, newest - age_ns)
        heads = store.segment_heads(device=device, source=source,
                                    t0_ns=cutoff - round(config.lookback_s * S), t1_ns=cutoff)
        for group in spans(heads, span_ns):
            if group[0].t_start_ns // span_ns >= cutoff // span_ns \
                    or max(h.t_end_ns for h in group) >= cutoff:
                continue  # the span goes on past the cutoff: next time, whole
            if not _mergeable(group, result):
                continue
            old = _fetch(store, group)
            if old is None:
                result.skip("changed while merging")
                continue
            try:
                new, samples = merged_segment(old)
            except KeyframeDecodeError:
                result.skip("a segment does not decode")
                continue
            except KeyframeError:
                result.skip("too many samples for one segment")
                continue
            pending.append((SegmentMerge(tuple(old), new), samples))
            if len(pending) >= config.batch:
                _commit(store, pending, result)
        if progress is not None:
            progress(done, len(streams))
    _commit(store, pending, result)
    return result


def _commit(store: Store, pending: list[tuple[SegmentMerge, int]],
            result: MergeResult) -> None:
    if not pending:
        return
    try:
        done = store.merge_segments([m for m, _ in pending])
    except StoreError as exc:
        if not exc.transient:
            raise
        result.skip("database busy", len(pending))  # a lock wait ran out, a deadlock
        pending.clear()
        return
    for (merge, samples), ok in zip(pending, done, strict=True):
        if not ok:
            result.skip("changed while merging")
            continue
        result.spans += 1
        result.segments_in += len(merge.old)
        result.bytes_in += sum(len(s.payload) for s in merge.old)
        result.bytes_out += len(merge.new.payload)
        result.points += merge.new.n_points
        result.samples += samples
    pending.clear()
