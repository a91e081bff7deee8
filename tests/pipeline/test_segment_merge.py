"""Merging old segments keeps every point, shrinks the store, and never loses a late
frame: one written into a merged span goes into its segment, and a merge that races a
writer skips the span."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest
from pydantic import ValidationError

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.membus import MemoryBus
from fabricops.pipeline import keyframe_block, segment_merge
from fabricops.pipeline.intake import segment_of
from fabricops.pipeline.keyframe import SeriesBlock, decode_block, encode_block
from fabricops.pipeline.keyframe_block import gauge_bounds
from fabricops.pipeline.late import Held, correct_windows
from fabricops.pipeline.segment_merge import (
    MergeConfig,
    merge_blocks,
    merge_segments,
    merged_segment,
)
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.store.records import SegmentMerge, SegmentRecord
from fabricops.store.store import Store, StoreError

from .conftest import Feed, bare_worker, messages, small_sim

S = 10**9
T0 = 1_800_000_000 * S  # a boundary of 60 s windows and of 600 s spans
PORTS = ["leaf-9:eth1", "leaf-9:eth2"]
Points = dict[tuple[str, str, int], tuple[list[int], list[int]]]


def _frame(t_s: float, seq: int) -> Frame:
    v = int(t_s * 1000)
    return Frame.build("leaf-9", T0 + round(t_s * S), "gnmi", seq, PORTS,
                       ["in_octets", "temperature_c"], [v, 40.0 + t_s / 64])


def _all_points(store: Store) -> Points:
    """Every stored point of every series, by (source, entity, metric id)."""
    out: Points = {}
    for seg in store.segments(t0_ns=0, t1_ns=2**62):
        block = decode_block(seg.payload)
        for row, (entity, metric) in enumerate(zip(block.entity, block.metric.tolist(),
                                                   strict=True)):
            ts, raw = out.setdefault((seg.source, entity, metric), ([], []))
            keep = block.present[row]
            ts += block.ts_ns[keep].tolist()
            raw += block.raw[row][keep].tolist()
    return out


def _block(t0_s: int, n: int, entities: tuple[str, ...], seed: int) -> SeriesBlock:
    rng = np.random.default_rng(seed)
    ts = T0 + (t0_s + np.arange(n, dtype=np.int64)) * S
    metric = np.array([CATALOGUE.id_of("in_octets"), CATALOGUE.id_of("rx_power_dbm")] *
                      len(entities), np.uint16)
    counters = np.cumsum(rng.integers(0, 2**40, (len(entities), n)), axis=1).astype(np.uint64)
    optics = rng.normal(-3.0, 0.5, (len(entities), n)).view(np.uint64)
    raw = np.stack([counters, optics], axis=1).reshape(-1, n)
    present = rng.random(raw.shape) > 0.05
    return SeriesBlock(ts, tuple(e for e in entities for _ in range(2)), metric,
                       np.where(present, raw, np.uint64(0)), present)


def _stored(block: SeriesBlock) -> SeriesBlock:
    return decode_block(encode_block(block, gauge_bounds(block.metric)))


def test_a_merged_block_holds_every_series_at_its_points() -> None:
    a = _stored(_block(0, 60, ("leaf-0:eth1", "leaf-0:eth2"), 1))
    b = _stored(_block(60, 60, ("leaf-0:eth2", "leaf-0:eth3"), 2))  # eth1 gone, eth3 new
    merged = merge_blocks([a, b])
    assert merged.n_points == 120
    assert merged.entity == ("leaf-0:eth1",) * 2 + ("leaf-0:eth2",) * 2 + ("leaf-0:eth3",) * 2
    assert not merged.present[:2, 60:].any(), "eth1 is absent where the second block lacks it"
    assert not merged.present[4:, :60].any()
    assert np.array_equal(merged.raw[2:4, :60], a.raw[2:4])
    assert np.array_equal(merged.raw[2:4, 60:], b.raw[:2])
    assert np.array_equal(merged.raw[4:, 60:], b.raw[2:])
    again = _stored(merged)
    assert again == merged, "gauges decoded once come back bit for bit when coded again"


def test_blocks_that_overlap_merge_into_the_union_of_their_samples() -> None:
    a = _stored(_block(0, 60, ("leaf-0:eth1",), 1))
    b = _stored(_block(50, 20, ("leaf-0:eth1",), 2))  # a copy of 50..59 differing, then more
    merged = merge_blocks([a, b])
    assert merged.n_points == 70
    both = a.present[:, 50:] & b.present[:, :10]
    assert np.array_equal(merged.raw[:, 50:60][both], a.raw[:, 50:][both]), "first wins"
    only_b = ~a.present[:, 50:] & b.present[:, :10]
    assert np.array_equal(merged.raw[:, 50:60][only_b], b.raw[:, :10][only_b])
    assert np.array_equal(merged.present[:, 50:60], a.present[:, 50:] | b.present[:, :10])
    assert np.array_equal(merged.raw[:, 60:], b.raw[:, 10:])
    with pytest.raises(ValueError, match="no block"):
        merge_blocks([])


def test_merging_a_pipeline_store_keeps_every_point_in_fewer_bytes(store: Store) -> None:
    feed = Feed(small_sim(), store)
    feed.run(240)
    feed.worker.flush()
    before, segments = _all_points(store), store.segments(t0_ns=0, t1_ns=2**62)
    cutoff = max(s.t_end_ns for s in segments) + 1
    result = merge_segments(store, older_than_ns=cutoff, config=MergeConfig(span_s=120))
    after = store.segments(t0_ns=0, t1_ns=2**62)
    assert result.spans > 0
    assert len(after) == len(segments) - result.segments_in + result.spans
    assert result.bytes_out < result.bytes_in
    assert sum(len(s.payload) for s in after) < sum(len(s.payload) for s in segments)
    assert _all_points(store) == before, "every series, every point, bit for bit"
    assert merge_segments(store, older_than_ns=cutoff,
                          config=MergeConfig(span_s=120)).spans == 0, "idempotent"


def test_only_spans_that_ended_before_the_cutoff_are_merged(store: Store) -> None:
    worker = bare_worker(store)
    worker.process(messages(*(_frame(t, i) for i, t in enumerate(range(10, 300, 20)))))
    worker.flush()
    assert len(store.segments(t0_ns=0, t1_ns=2**62)) == 5
    result = merge_segments(store, older_than_ns=T0 + 230 * S, config=MergeConfig(span_s=120))
    assert (result.spans, result.segments_in) == (1, 2), "the span cut by the cutoff waits"
    starts = [(s.t_start_ns - T0) // S for s in store.segments(t0_ns=0, t1_ns=2**62)]
    assert starts == [10, 130, 190, 250]
    lagging = merge_segments(store, age_ns=50 * S, config=MergeConfig(span_s=120))
    assert lagging.spans == 1, "a stream's own newest data sets its cutoff"
    starts = [(s.t_start_ns - T0) // S for s in store.segments(t0_ns=0, t1_ns=2**62)]
    assert starts == [10, 130, 250]


def test_a_late_frame_of_a_merged_span_is_stored_beside_it(store: Store) -> None:
    worker = bare_worker(store)
    worker.process(messages(_frame(10, 1), _frame(30, 2), _frame(70, 3), _frame(130, 4),
                         _frame(190, 5)))
    span = MergeConfig(span_s=120)
    merge_segments(store, older_than_ns=T0 + 180 * S, config=span)
    (merged,) = store.segments(t0_ns=0, t1_ns=T0 + 119 * S)
    fixed = worker.process(messages(_frame(80, 6), offset=5))
    assert (fixed.late, fixed.rejected) == (1, {})
    segments = store.segments(t0_ns=0, t1_ns=T0 + 119 * S)
    assert segments[0] == merged, "the merged segment is not written again"
    beside = decode_block(segments[1].payload)
    assert ((beside.ts_ns - T0) // S).tolist() == [80], "only what the merged one lacks"
    assert beside.raw[0].tolist() == [80_000]
    again = worker.process(messages(_frame(80, 6), _frame(30, 2), offset=6))
    assert again.rejected == {"duplicate": 2}
    assert merge_segments(store, older_than_ns=T0 + 180 * S, config=span).spans == 1
    (folded,) = store.segments(t0_ns=0, t1_ns=T0 + 119 * S)
    block = decode_block(folded.payload)
    assert ((block.ts_ns - T0) // S).tolist() == [10, 30, 70, 80]
    assert block.raw[0].tolist() == [10_000, 30_000, 70_000, 80_000]


def test_a_window_close_leaves_a_merged_segment_that_reaches_past_it(store: Store) -> None:
    worker = bare_worker(store)
    worker.process(messages(_frame(10, 1), _frame(70, 2), _frame(130, 3)))
    worker.flush()
    merge_segments(store, older_than_ns=T0 + 120 * S, config=MergeConfig(span_s=120))
    assert len(store.segments(t0_ns=0, t1_ns=T0 + 119 * S)) == 1
    before = _all_points(store)
    # a writer that read nothing of window 0 before the merge writes it back alone
    store.close_window([segment_of("leaf-9", "gnmi", [_frame(20, 9)])], device="leaf-9",
                       source="gnmi", before_ts_ns=T0 + 60 * S, window=(T0, T0 + 60 * S))
    points = _all_points(store)
    for key, (ts, raw) in before.items():
        kept = dict(zip(points[key][0], points[key][1], strict=True))
        assert all(kept[t] == v for t, v in zip(ts, raw, strict=True)), "nothing lost"


def test_a_merge_that_races_a_writer_skips_the_span(store: Store) -> None:
    worker = bare_worker(store)
    worker.process(messages(_frame(10, 1), _frame(70, 2), _frame(130, 3)))
    old = tuple(store.segments(t0_ns=0, t1_ns=T0 + 119 * S))
    merge = SegmentMerge(old, merged_segment(old)[0])
    worker.process(messages(_frame(80, 4), offset=3))  # a late frame rewrites window 1
    before = _all_points(store)
    assert store.merge_segments([merge]) == [False]
    assert _all_points(store) == before, "the late frame is still there"
    assert len(store.segments(t0_ns=0, t1_ns=T0 + 119 * S)) == 2


def test_a_span_with_a_segment_that_does_not_decode_is_left_and_counted(store: Store) -> None:
    worker = bare_worker(store)
    worker.process(messages(*(_frame(t, i) for i, t in enumerate(range(10, 1300, 30)))))
    worker.flush()
    broken = store.segments(t0_ns=0, t1_ns=T0 + 59 * S)[0]
    store.replace_segments([replace(broken, payload=broken.payload[:-5])])
    result = merge_segments(store, older_than_ns=T0 + 1200 * S)
    assert result.skipped == {"a segment does not decode": 1}
    assert result.spans == 1, "the next span is merged all the same"
    starts = [(s.t_start_ns - T0) // S for s in store.segments(t0_ns=0, t1_ns=T0 + 599 * S)]
    assert len(starts) == 10, "the broken span is as it was"


def test_windows_that_do_not_divide_the_span_are_merged_too(store: Store) -> None:
    bus = MemoryBus()
    bus.start()
    worker = PipelineWorker(PipelineConfig(max_future_s=1e9, keyframe_interval_s=90), bus, store)
    worker.process(messages(*(_frame(t, i) for i, t in enumerate(range(10, 1300, 20)))))
    worker.flush()
    before = _all_points(store)
    result = merge_segments(store, older_than_ns=T0 + 1300 * S)
    assert (result.spans, result.skipped) == (2, {})
    assert _all_points(store) == before
    ends = [(s.t_end_ns - T0) // S for s in store.segments(t0_ns=0, t1_ns=2**62)]
    assert ends[0] >= 600, "the first span's last window ends past the span"


W = 60 * S
SPAN = MergeConfig(span_s=120)


def _late(store: Store, *frames: Frame) -> None:
    correct_windows(store, list(frames), W, segment_of)


def _window(store: Store, *times: int) -> None:
    frames = [_frame(t, t) for t in times]
    t0 = frames[0].ts_ns // W * W
    store.close_window([segment_of("leaf-9", "gnmi", frames)], device="leaf-9", source="gnmi",
                       before_ts_ns=t0 + W, window=(t0, t0 + W))


def _merge_after_next_read(store: Store, older_than_ns: int) -> None:
    """Make the next window read be followed at once by a merge of one span: a merge
    that commits between a writer's read and its write."""
    read = store.streams_window_segments

    def merge_after_the_read(streams: Sequence[tuple[str, str]], **kw: int
                             ) -> dict[tuple[str, str], list[SegmentRecord]]:
        found = read(streams, **kw)
        store.streams_window_segments = read  # type: ignore[method-assign]
        assert merge_segments(store, older_than_ns=older_than_ns, config=SPAN).spans == 1
        return found

    store.streams_window_segments = merge_after_the_read  # type: ignore[method-assign]


def _times(store: Store) -> list[int]:
    return sorted({t for (_, _, m), (ts, _) in _all_points(store).items() for t in ts
                   if m == CATALOGUE.id_of("in_octets")})


def test_a_window_written_again_beside_a_merge_is_seen_as_changed(store: Store) -> None:
    for times in ((10, 30), (100,), (130,), (190,)):
        _window(store, *times)
    _merge_after_next_read(store, T0 + 300 * S)
    _late(store, _frame(70, 70))  # written beside the merged segment, 100 in both
    merge = store.merge_segments

    def late_frame_before_the_merge_commits(merges: list[SegmentMerge]) -> list[bool]:
        _late(store, _frame(80, 80))
        return merge(merges)

    store.merge_segments = late_frame_before_the_merge_commits  # type: ignore[method-assign]
    result = merge_segments(store, older_than_ns=T0 + 300 * S, config=SPAN)
    assert result.skipped == {"changed while merging": 1}
    assert [(t - T0) // S for t in _times(store)] == [10, 30, 70, 80, 100, 130, 190]


def test_a_window_write_that_loses_the_race_is_handled_again_and_kept(store: Store) -> None:
    worker = bare_worker(store)
    worker.process(messages(_frame(10, 1), _frame(70, 2), _frame(130, 3), _frame(190, 4)))
    worker.flush()
    _merge_after_next_read(store, T0 + 180 * S)
    with pytest.raises(StoreError, match="read the window again") as raised:
        worker.process(messages(_frame(20, 5), offset=4))  # its segment takes the merged key
    assert raised.value.transient
    worker.recover()
    fixed = worker.process(messages(_frame(20, 5), offset=4))
    assert fixed.late == 1
    assert [(t - T0) // S for t in _times(store)] == [10, 20, 70, 130, 190]


def test_each_stream_waits_for_its_own_cutoff_and_whole_spans(store: Store) -> None:
    windows = {"leaf-1": ((10, 20), (70,), (130,), (190,), (485, 490), (545,), (605,)),
               "leaf-2": ((10,), (70,), (130,), (190,))}
    for device, times in windows.items():
        for part in times:
            frames = [Frame.build(device, T0 + t * S, "gnmi", t, [f"{device}:eth1"],
                                  ["in_octets"], [t]) for t in part]
            t0 = frames[0].ts_ns // W * W
            store.close_window([segment_of(device, "gnmi", frames)], device=device,
                               source="gnmi", before_ts_ns=t0 + W, window=(t0, t0 + W))
    merge_segments(store, age_ns=35 * S, config=SPAN)
    starts = {d: [(s.t_start_ns - T0) // S for s in store.segments(
        t0_ns=0, t1_ns=2**62, devices=[d])] for d in windows}
    assert starts["leaf-1"] == [10, 130, 485, 545, 605], \
        "its cutoff is 570: the span from 480 goes on past it and waits"
    assert starts["leaf-2"] == [10, 130, 190], "its own cutoff is 155, not leaf-1's"


def test_spans_before_the_lookback_are_left(store: Store) -> None:
    for times in ((10,), (70,), (7210,), (7270,), (7330,)):
        _window(store, *times)
    config = MergeConfig(span_s=120, lookback_s=600)
    assert merge_segments(store, older_than_ns=T0 + 7400 * S, config=config).spans == 1
    assert len(store.segments(t0_ns=0, t1_ns=T0 + 119 * S)) == 2


def test_a_span_too_big_for_one_segment_is_left_and_counted(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    _window(store, 10, 20, 30)
    _window(store, 250)  # the stream's newest data, past the span
    store.close_window([segment_of("leaf-9", "gnmi", [Frame.build(
        "leaf-9", T0 + t * S, "gnmi", t, ["leaf-9:eth2"], ["in_octets"], [t])
        for t in (70, 80, 90)])], device="leaf-9", source="gnmi", before_ts_ns=T0 + 120 * S,
        window=(T0 + 60 * S, T0 + 120 * S))
    monkeypatch.setattr(keyframe_block, "MAX_SAMPLES", 3 * 6 - 1)  # 3 series x 6 points
    monkeypatch.setattr(segment_merge, "MAX_SAMPLES", 3 * 6 - 1)
    result = merge_segments(store, older_than_ns=T0 + 200 * S, config=SPAN)
    assert (result.spans, result.skipped) == (0, {"too many samples for one segment": 1})
    assert len(store.segments(t0_ns=0, t1_ns=2**62)) == 3


def test_a_busy_database_skips_the_batch_and_the_run_goes_on(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    for times in ((10,), (70,), (130,), (190,), (250,)):
        _window(store, *times)
    calls = []

    def busy_once(merges: list[SegmentMerge]) -> list[bool]:
        calls.append(len(merges))
        if len(calls) == 1:
            raise StoreError("merge_segments: database is locked", transient=True)
        return Store.merge_segments(store, merges)

    monkeypatch.setattr(store, "merge_segments", busy_once)
    result = merge_segments(store, older_than_ns=T0 + 300 * S,
                            config=MergeConfig(span_s=120, batch=1))
    assert (result.spans, result.skipped) == (1, {"database busy": 1})
    assert calls == [1, 1]


def test_a_window_written_again_keeps_what_it_held_and_drops_only_new_covered_times() -> None:
    f = {t: _frame(t, t) for t in (60, 70, 80, 90, 100)}

    def at(*times: int) -> dict[int, Frame]:
        return {f[t].ts_ns: f[t] for t in times}

    held = Held(within=at(70, 100), covered=set(at(90, 100)))
    rows = held.to_write(at(70, 100, 80, 90).values())
    assert [(r.ts_ns - T0) // S for r in rows] == [70, 80, 100], \
        "100 was the window's own: kept, so the segment only grows; 90 is held elsewhere"
    held = Held(within=at(60, 100), covered=set(at(60)))
    rows = held.to_write(at(60, 100, 80).values())
    assert [(r.ts_ns - T0) // S for r in rows] == [80, 100], \
        "a covered first time goes: the segment starts elsewhere, never at a merged key"


def test_spans_must_divide_an_hour_in_whole_nanoseconds() -> None:
    for span in (60, 100, 600, 900, 3600):
        assert MergeConfig(span_s=span).span_s == span
    for span in (45 * 60, 3600 / 13, 7 * 60):
        with pytest.raises(ValidationError, match="does not divide an hour"):
            MergeConfig(span_s=span)


def test_a_span_whose_last_window_ends_past_the_cutoff_waits(store: Store) -> None:
    for t0, times in ((0, (10, 50)), (540, (550, 620)), (630, (640,))):
        frames = [_frame(t, t) for t in times]
        store.close_window([segment_of("leaf-9", "gnmi", frames)], device="leaf-9",
                           source="gnmi", before_ts_ns=T0 + (t0 + 90) * S,
                           window=(T0 + t0 * S, T0 + (t0 + 90) * S))
    config = MergeConfig(span_s=600)
    assert merge_segments(store, older_than_ns=T0 + 615 * S, config=config).spans == 0
    assert merge_segments(store, older_than_ns=T0 + 625 * S, config=config).spans == 1
