"""Staged frames, closing windows and stream checkpoints, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import create_engine, update

from fabricops.core.frame import Source
from fabricops.store import Store, StoreError
from fabricops.store.database import parse_url
from fabricops.store.models import STAGED_FRAMES
from tests.store import samples
from tests.store.samples import T0, S


def test_staged_frames_round_trip_bit_exact(store: Store) -> None:
    frames = [samples.frame(d, k, src) for d in ("leaf_0", "leaf-0")
              for src in (Source.SNMP, Source.GNMI) for k in (3, 1, 2)]
    assert store.stage_frames(frames) == len(frames)
    assert store.stage_frames(frames[::-1]) == 0
    staged = store.staged_frames()
    expected = sorted(frames, key=lambda f: (f.device, f.source.value, f.ts_ns))
    assert staged == expected
    assert all(a.raw.tobytes() == b.raw.tobytes() for a, b in zip(staged, expected, strict=True))
    assert store.staged_frames(device="leaf-0", source="snmp") == [
        f for f in expected if f.device == "leaf-0" and f.source is Source.SNMP]


def test_a_staged_frame_that_no_longer_decodes_is_skipped_and_counted(
        store: Store, db_url: str) -> None:
    frames = [samples.frame("leaf-0", k) for k in range(3)]
    store.stage_frames(frames)
    engine = create_engine(parse_url(db_url))
    with engine.begin() as conn:
        conn.execute(update(STAGED_FRAMES).where(STAGED_FRAMES.c.ts_ns == frames[1].ts_ns)
                     .values(frame=b"not a frame"))
    engine.dispose()
    assert store.staged_frames() == [frames[0], frames[2]]
    assert store.registry.get_sample_value("fabricops_store_errors_total",
                                           {"op": "staged_frames_decode"}) == 1


def test_a_sequence_number_past_the_signed_range_is_a_store_error(store: Store) -> None:
    frame = samples.frame("leaf-0", 1)
    too_big = dataclasses.replace(frame, seq=2**63)
    with pytest.raises(StoreError, match="stage_frames"):
        store.stage_frames([frame, too_big])
    assert store.staged_frames() == []


def test_close_window_stores_segments_and_unstages_their_frames(store: Store) -> None:
    samples.stage_three_streams(store)
    seg = samples.segment("leaf-0", 0)
    assert store.close_window([seg], device="leaf-0", source="gnmi",
                              before_ts_ns=T0 + 5 * S) == 1
    assert [f.ts_ns for f in store.staged_frames(device="leaf-0", source="gnmi")] == \
        [T0 + k * S for k in range(5, 10)]
    assert len(store.staged_frames()) == 25
    assert store.segments(t0_ns=0, t1_ns=2**62) == [seg]
    assert store.close_window([seg], device="leaf-0", source="gnmi",
                              before_ts_ns=T0 + 5 * S) == 0
    assert len(store.staged_frames()) == 25


def test_close_window_is_one_transaction(store: Store) -> None:
    samples.stage_three_streams(store)
    before = store.staged_frames()
    good = samples.segment("leaf-0", 0)
    broken = dataclasses.replace(samples.segment("leaf-0", 1), payload=None)
    with pytest.raises(StoreError, match=r"close_window on database .*(NOT NULL|not-null)"):
        store.close_window([good, broken], device="leaf-0", source="gnmi",
                           before_ts_ns=T0 + 100 * S)
    assert store.staged_frames() == before
    assert store.segments(t0_ns=0, t1_ns=2**62) == []
    assert store.registry.get_sample_value("fabricops_store_errors_total",
                                           {"op": "close_window"}) == 1


def test_close_window_saves_the_newest_stream_checkpoint(store: Store) -> None:
    samples.stage_three_streams(store)
    assert store.stream_states() == {}
    store.close_window([], device="leaf-0", source="gnmi", before_ts_ns=T0 + 5 * S,
                       state=b"five")
    store.close_window([], device="leaf-1", source="gnmi", before_ts_ns=T0 + 2 * S,
                       state=b"\x00two\xff")
    store.close_window([], device="leaf-0", source="gnmi", before_ts_ns=T0 + 3 * S,
                       state=b"three, replayed late")
    assert store.stream_states() == {("leaf-0", "gnmi"): b"five",
                                     ("leaf-1", "gnmi"): b"\x00two\xff"}
    store.close_window([], device="leaf-0", source="gnmi", before_ts_ns=T0 + 8 * S,
                       state=b"eight")
    assert store.stream_states()[("leaf-0", "gnmi")] == b"eight"
    broken = dataclasses.replace(samples.segment("leaf-0", 1), payload=None)
    with pytest.raises(StoreError):
        store.close_window([broken], device="leaf-0", source="gnmi",
                           before_ts_ns=T0 + 9 * S, state=b"nine")
    assert store.stream_states()[("leaf-0", "gnmi")] == b"eight"
    assert len(store.staged_frames(device="leaf-0", source="gnmi")) == 2
