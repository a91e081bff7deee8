"""The store's side of merging segments, on SQLite and PostgreSQL: a merge replaces
exactly the segments it read or nothing, and a window close never deletes a merged
segment that reaches past its window."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fabricops.store import SegmentRecord, Store, StoreError
from fabricops.store.records import SegmentMerge, WindowClose

from .samples import T0, S, segment


def _merged(old: list[SegmentRecord]) -> SegmentRecord:
    return replace(old[0], t_end_ns=old[-1].t_end_ns, last_seq=old[-1].last_seq,
                   n_points=sum(s.n_points for s in old), payload=b"merged")


def _starts(store: Store, device: str = "leaf-0") -> list[int]:
    return [(s.t_start_ns - T0) // S for s in store.segments(t0_ns=0, t1_ns=2**62,
                                                              devices=[device])]


def test_a_merge_replaces_exactly_the_segments_it_read(store: Store) -> None:
    old = [segment("leaf-0", i) for i in range(4)]
    store.put_segments([*old, segment("leaf-1", 0)])
    assert store.merge_segments([SegmentMerge(tuple(old[:3]), _merged(old[:3]))]) == [True]
    assert _starts(store) == [0, 180]
    kept = store.segments(t0_ns=0, t1_ns=2**62, devices=["leaf-0"])[0]
    assert (kept.payload, kept.n_points, kept.t_end_ns) == (
        b"merged", 3003, old[2].t_end_ns)
    assert _starts(store, "leaf-1") == [0], "another stream is untouched"


def test_a_merge_of_segments_changed_since_they_were_read_does_nothing(store: Store) -> None:
    old = [segment("leaf-0", i) for i in range(3)]
    store.put_segments(old)
    corrected = replace(old[1], n_points=old[1].n_points + 1, payload=b"with a late frame")
    store.replace_segments([corrected])
    assert store.merge_segments([SegmentMerge(tuple(old), _merged(old))]) == [False]
    now = [old[0], corrected, old[2]]
    store.put_segments([replace(corrected, t_start_ns=corrected.t_start_ns - S, first_seq=7)])
    assert store.merge_segments([SegmentMerge(tuple(now), _merged(now))]) == [False], \
        "a segment the merge did not read lies in its range"
    kept = store.segments(t0_ns=0, t1_ns=2**62)
    assert sorted(s.payload for s in kept) == sorted(
        [old[0].payload, corrected.payload, corrected.payload, old[2].payload]), \
        "every segment is put back as it was"


def _window_segments(store: Store, *, device: str, source: str, t0_ns: int, t1_ns: int,
                     reach_ns: int) -> list[SegmentRecord]:
    """What the store holds of one stream's window (read for that stream alone)."""
    found = store.streams_window_segments([(device, source)], t0_ns=t0_ns, t1_ns=t1_ns,
                                          reach_ns=reach_ns)
    return found.get((device, source), [])


def test_heads_and_what_a_window_write_reads(store: Store) -> None:
    store.put_segments([segment("leaf-0", i) for i in range(4)] + [segment("leaf-0", 0, "snmp")])
    heads = store.segment_heads(device="leaf-0", source="gnmi", t0_ns=T0 + 60 * S,
                                t1_ns=T0 + 179 * S + 1)
    assert [(h.t_start_ns - T0) // S for h in heads] == [60, 120]
    assert heads[0].n_points == 1001
    old = [segment("leaf-0", i) for i in range(3)]
    store.merge_segments([SegmentMerge(tuple(old), _merged(old))])
    found = _window_segments(store, device="leaf-0", source="gnmi", t0_ns=T0 + 120 * S,
                                  t1_ns=T0 + 180 * S, reach_ns=600 * S)
    assert [s.payload for s in found] == [b"merged"], "the merged segment covers it"
    found = _window_segments(store, device="leaf-0", source="gnmi", t0_ns=T0 + 180 * S,
                                  t1_ns=T0 + 240 * S, reach_ns=600 * S)
    assert [(s.t_start_ns - T0) // S for s in found] == [180]
    assert _window_segments(store, device="leaf-0", source="gnmi", t0_ns=T0 + 120 * S,
                                 t1_ns=T0 + 180 * S, reach_ns=60 * S) == [], \
        "no further back than a segment can start"


def test_the_windows_of_many_streams_are_read_in_one_statement(store: Store) -> None:
    """What each stream holds of one window, as it is read for that stream alone; a
    stream with nothing is left out, and a device's other source (asked for another
    device) is not given."""
    store.put_segments([segment("leaf-0", 2), segment("leaf-1", 2), segment("leaf-1", 3),
                        segment("leaf-0", 2, "snmp"), segment("leaf-2", 2, "snmp")])
    streams = [("leaf-0", "gnmi"), ("leaf-1", "gnmi"), ("leaf-2", "snmp"), ("leaf-3", "gnmi")]
    window = {"t0_ns": T0 + 120 * S, "t1_ns": T0 + 180 * S, "reach_ns": 600 * S}
    found = store.streams_window_segments(streams, **window)
    assert sorted(found) == [("leaf-0", "gnmi"), ("leaf-1", "gnmi"), ("leaf-2", "snmp")]
    for device, source in streams:
        one = _window_segments(store, device=device, source=source, **window)
        assert found.get((device, source), []) == one
    assert [(s.device, s.source, (s.t_start_ns - T0) // S)
            for s in found[("leaf-1", "gnmi")]] == [("leaf-1", "gnmi", 120)]


def test_a_window_close_keeps_a_merged_segment_reaching_past_the_window(store: Store) -> None:
    old = [segment("leaf-0", i) for i in range(3)]
    store.put_segments(old)
    store.merge_segments([SegmentMerge(tuple(old), _merged(old))])
    store.close_window([replace(segment("leaf-0", 0), first_seq=1, payload=b"late")],
                       device="leaf-0", source="gnmi", before_ts_ns=T0 + 60 * S,
                       window=(T0, T0 + 60 * S))
    payloads = sorted(s.payload for s in store.segments(t0_ns=0, t1_ns=2**62))
    assert payloads == [b"late", b"merged"]


def test_a_window_written_with_the_key_of_a_merged_segment_is_tried_again(
        store: Store) -> None:
    old = [segment("leaf-0", i) for i in range(3)]
    store.put_segments(old)
    store.merge_segments([SegmentMerge(tuple(old), _merged(old))])
    again = replace(segment("leaf-0", 0), payload=b"read before the merge")
    with pytest.raises(StoreError, match="read the window again") as raised:
        store.close_window([again], device="leaf-0", source="gnmi",
                           before_ts_ns=T0 + 60 * S, window=(T0, T0 + 60 * S))
    assert raised.value.transient, "the writer reads the window again and retries"
    assert [s.payload for s in store.segments(t0_ns=0, t1_ns=2**62)] == [b"merged"]


def test_one_changed_span_does_not_hold_back_the_others_of_its_batch(store: Store) -> None:
    a = [segment("leaf-0", i) for i in range(3)]
    b = [segment("leaf-1", i) for i in range(3)]
    store.put_segments(a + b)
    store.replace_segments([replace(a[1], n_points=a[1].n_points + 1, payload=b"late")])
    done = store.merge_segments([SegmentMerge(tuple(a), _merged(a)),
                                 SegmentMerge(tuple(b), _merged(b))])
    assert done == [False, True]
    assert _starts(store, "leaf-0") == [0, 60, 120], "the changed span is as it was"
    assert [s.payload for s in store.segments(t0_ns=0, t1_ns=2**62, devices=["leaf-1"])] == [
        b"merged"]


def test_two_segments_with_one_key_in_one_write_are_a_callers_error(store: Store) -> None:
    close = WindowClose("leaf-0", "gnmi", (T0, T0 + 60 * S), [segment("leaf-0", 0)],
                        T0 + 60 * S, None)
    with pytest.raises(StoreError, match="same key") as raised:
        store.close_windows([close, close])
    assert not raised.value.transient, "retrying the same write cannot help"
    assert store.segments(t0_ns=0, t1_ns=2**62) == []
