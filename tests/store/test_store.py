"""Store behaviour, on SQLite and on a real PostgreSQL (``db_url`` / ``store`` fixtures)."""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from typing import Any

import pytest

from fabricops.core.records import Event, EventKind
from fabricops.store import IntPathRecord, Store, StoreConfig
from tests.store import samples
from tests.store.samples import PATH_A, PATH_B, PATH_C, PATH_D, T0, S, int_path


def test_series_are_stored_once_and_filtered(store: Store) -> None:
    records = samples.series()
    assert store.put_series(records) == len(records)
    everything = store.series()
    assert store.put_series(records) == 0
    assert store.series() == everything
    assert everything == sorted(records, key=lambda r: (r.device, r.entity, r.metric))
    assert store.series(device="leaf_0") == [r for r in everything if r.device == "leaf_0"]
    assert store.series(entity="Leaf-1:eth2") == [r for r in everything
                                                  if r.entity == "Leaf-1:eth2"]


def test_segments_are_stored_once(store: Store) -> None:
    records = samples.segments()
    assert store.put_segments(records) == len(records)
    before = store.segments(t0_ns=0, t1_ns=2**63 - 1)
    assert store.put_segments(records) == 0
    assert store.put_segments([*records[:3], samples.segment("new", 0)]) == 1
    assert store.segments(t0_ns=0, t1_ns=2**63 - 1) == sorted(
        [*before, samples.segment("new", 0)],
        key=lambda r: (r.device, r.source, r.t_start_ns, r.first_seq))
    assert before == samples.segments_overlapping(records, 0, 2**63 - 1)


def test_replacing_segments_rewrites_them_in_place_once(store: Store) -> None:
    records = samples.segments()
    store.put_segments(records)
    smaller = [dataclasses.replace(r, n_points=2, payload=b"coarser") for r in records[:2]]
    assert store.replace_segments(smaller) == 2
    assert store.replace_segments(smaller) == 0, "an unchanged segment is not rewritten"
    got = store.segments(t0_ns=0, t1_ns=2**63 - 1)
    assert len(got) == len(records)
    assert [r for r in got if r.payload == b"coarser"] == sorted(
        smaller, key=lambda r: (r.device, r.source, r.t_start_ns, r.first_seq))


@pytest.mark.parametrize(("t0_s", "t1_s", "devices", "source"), [
    (0, 59, None, None),
    (59, 60, None, None),
    (61, 119, ["leaf_0", "spine-9"], None),
    (0, 10_000, ["Leaf-1"], "snmp"),
    (130, 200, None, "gnmi"),
    (1_000, 2_000, None, None),
    (0, 10_000, [], None),
])
def test_segments_overlapping_a_range(store: Store, t0_s: int, t1_s: int,
                                      devices: list[str] | None, source: str | None) -> None:
    records = samples.segments()
    store.put_segments(records)
    t0, t1 = T0 + t0_s * S, T0 + t1_s * S
    assert store.segments(t0_ns=t0, t1_ns=t1, devices=devices, source=source) == \
        samples.segments_overlapping(records, t0, t1, devices, source)


def test_segment_watermarks_are_the_latest_end_per_device_and_source(store: Store) -> None:
    store.put_segments(samples.segments()[::-1])
    last = samples.segment("x", 5).t_end_ns
    assert store.segment_watermarks() == {(d, s): last for d in samples.DEVICES
                                          for s in samples.SOURCES}


def test_events_with_nan_and_infinite_values_read_back(store: Store) -> None:
    odd = [e.model_copy(update={"value": v}) for e, v in
           zip(samples.events(), (math.nan, math.inf, -math.inf, -0.0, 5e-324), strict=False)]
    assert store.put_events(odd) == len(odd)
    assert store.put_events(odd) == 0
    back = store.events(t0_ns=0, t1_ns=2**62)

    def comparable(events: list[Event]) -> list[tuple[Event, object]]:
        return [(e.model_copy(update={"value": 0.0}), "nan" if math.isnan(e.value) else e.value)
                for e in events]

    assert comparable(back) == comparable(samples.events_matching(odd, 0, 2**62))


def test_events_are_stored_once(store: Store) -> None:
    records = samples.events()
    assert store.put_events(records) == len(records)
    before = store.events(t0_ns=0, t1_ns=2**63 - 1)
    assert store.put_events(records[::-1]) == 0
    assert store.events(t0_ns=0, t1_ns=2**63 - 1) == before == \
        samples.events_matching(records, 0, 2**63 - 1)
    changed = records[0].model_copy(update={"value": 99.0, "detail": "again"})
    assert store.put_events([changed]) == 0
    assert store.events(t0_ns=0, t1_ns=2**63 - 1) == before


@pytest.mark.parametrize("query", [
    {"t0_s": 0, "t1_s": 9},
    {"t0_s": 3, "t1_s": 3},
    {"t0_s": 2, "t1_s": 7, "devices": ["leaf_0", "Leaf-1"]},
    {"t0_s": 0, "t1_s": 9, "entities": ["spine-9:eth1"]},
    {"t0_s": 0, "t1_s": 9, "metric": "oper_status", "kind": EventKind.ANOMALY},
    {"t0_s": 0, "t1_s": 9, "devices": ["leaf-0"], "limit": 7},
    {"t0_s": 20, "t1_s": 30},
])
def test_events_matching_a_query(store: Store, query: dict[str, object]) -> None:
    records = samples.events()
    store.put_events(records)
    args: dict[str, Any] = dict(query)
    t0, t1 = T0 + args.pop("t0_s") * S, T0 + args.pop("t1_s") * S
    assert store.events(t0_ns=t0, t1_ns=t1, **args) == \
        samples.events_matching(records, t0, t1, **args)


def test_int_paths_are_merged_and_a_repeat_changes_nothing(store: Store) -> None:
    first = int_path(PATH_A, 100, 200, n_reports=5, latency_ns=1000)
    assert store.put_int_paths([first, first]) == 1
    assert store.put_int_paths([first]) == 0
    assert store.int_paths(t0_ns=0, t1_ns=2**62) == [first]

    later = int_path(PATH_A, 300, 400, n_reports=3, latency_ns=500, sink="leaf-9")
    assert store.put_int_paths([later]) == 1
    merged = dataclasses.replace(first, sink="leaf-9", last_ts_ns=later.last_ts_ns, n_reports=8)
    assert store.int_paths(t0_ns=0, t1_ns=2**62) == [merged]
    assert store.put_int_paths([later, first]) == 0

    overlapping = int_path(PATH_A, 150, 250, n_reports=20, latency_ns=2000)
    assert store.put_int_paths([overlapping]) == 1
    assert store.int_paths(t0_ns=0, t1_ns=2**62) == [
        dataclasses.replace(merged, n_reports=20, max_hop_latency_ns=2000)]


@pytest.mark.parametrize(("switch", "paths"), [
    (None, [PATH_A, PATH_D, PATH_C, PATH_B, PATH_A]),
    ("spine-1", [PATH_A, PATH_C, PATH_A]),
    ("spine-10", [PATH_B]),
    ("leaf_0", [PATH_C]),
    ("leafX0", [PATH_D, PATH_C]),
    ("leaf", []),
    ("eth3", []),
])
def test_int_paths_crossing_a_switch(store: Store, switch: str | None,
                                     paths: list[str]) -> None:
    records = samples.int_paths()
    assert store.put_int_paths(records) == len(records)
    found = store.int_paths(t0_ns=T0, t1_ns=T0 + 1000 * S, switch=switch)
    assert [r.path for r in found] == paths
    assert all(r in records for r in found)


def test_int_paths_seen_within_a_range(store: Store) -> None:
    records = samples.int_paths()
    store.put_int_paths(records)

    def seen(t0_s: int, t1_s: int) -> list[IntPathRecord]:
        return store.int_paths(t0_ns=T0 + t0_s * S, t1_ns=T0 + t1_s * S)

    assert seen(11, 29) == [records[1]]
    assert seen(40, 50) == [records[3], records[2]]
    assert seen(61, 99) == []
    assert seen(0, 5) == [records[0], records[1]]


def test_prune_deletes_what_is_older_than_retention(db_url: str) -> None:
    store = Store(StoreConfig(url=db_url, retention_s=3600))
    store.start()
    try:
        segs = [samples.segment("leaf-0", i) for i in range(120)]
        events = [e.model_copy(update={"ts_ns": e.ts_ns + j * 100 * S})
                  for j in range(10) for e in samples.events()]
        paths = samples.int_paths()
        store.put_segments(segs)
        store.put_events(events)
        store.put_int_paths(paths)
        samples.stage_three_streams(store)
        cutoff = T0 + 600 * S
        deleted = store.prune(now_ns=cutoff + 3600 * S)

        kept_segs = [r for r in segs if r.t_end_ns >= cutoff]
        kept_events = samples.events_matching(events, cutoff, 2**62)
        assert store.segments(t0_ns=0, t1_ns=2**62) == kept_segs
        assert store.events(t0_ns=0, t1_ns=2**62) == kept_events
        assert store.int_paths(t0_ns=0, t1_ns=2**62) == []
        assert store.staged_frames() == []
        old_events = len(events) - len(kept_events)
        assert (len(segs) - len(kept_segs), old_events) == (10, len(events) * 6 // 10)
        assert deleted == 10 + old_events + len(paths) + 30
        assert store.prune(now_ns=cutoff + 3600 * S) == 0
    finally:
        store.stop()


def test_prune_deletes_in_batches_and_stops_between_them(db_url: str) -> None:
    store = Store(StoreConfig(url=db_url, retention_s=3600))
    store.start()
    try:
        store.put_segments([samples.segment("leaf-0", i) for i in range(120)])
        now = T0 + 600 * S + 3600 * S
        asked: list[bool] = []

        def stop() -> bool:
            asked.append(True)
            return len(asked) > 1

        assert store.prune(now_ns=now, batch=3, stop=stop) == 3, "one batch, then it stops"
        assert store.prune(now_ns=now, batch=3) == 7, "the rest, three at a time"
        assert len(store.segments(t0_ns=0, t1_ns=2**62)) == 110
    finally:
        store.stop()


def test_ten_thousand_rows_are_one_quick_batch(store: Store) -> None:
    segs = [samples.segment(f"leaf-{i % 100}", i // 100) for i in range(10_000)]
    events = [Event(ts_ns=T0 + i * S, device=f"leaf-{i % 100}", entity=f"leaf-{i % 100}:eth1",
                    metric="in_fcs_errors", kind=EventKind.THRESHOLD, value=i)
              for i in range(10_000)]
    started = time.perf_counter()
    assert store.put_segments(segs) == 10_000
    assert store.put_events(events) == 10_000
    assert store.put_segments(segs) == 0
    assert store.put_events(events) == 0
    assert time.perf_counter() - started < 10.0
    assert len(store.segments(t0_ns=0, t1_ns=2**62)) == 10_000


def test_metrics_count_rows_and_duplicates(store: Store) -> None:
    events = samples.events()[:5]
    store.put_events(events)
    store.put_events(events)
    value = store.registry.get_sample_value
    assert value("fabricops_store_rows_written_total", {"table": "events"}) == 5
    assert value("fabricops_store_duplicates_ignored_total", {"table": "events"}) == 5
    assert value("fabricops_store_write_seconds_count", {"op": "put_events"}) == 2


def _fill(store: Store) -> None:
    store.put_series(samples.series())
    store.put_segments(samples.segments())
    store.put_events(samples.events())
    store.put_int_paths(samples.int_paths())
    store.put_int_paths([int_path(PATH_A, 5, 30, n_reports=2, latency_ns=4000)])
    samples.stage_three_streams(store)
    store.close_window([samples.segment("leaf-0", 9)], device="leaf-0", source="gnmi",
                       before_ts_ns=T0 + 4 * S)


def _answers(store: Store) -> list[object]:
    window = {"t0_ns": T0 + 30 * S, "t1_ns": T0 + 200 * S}
    return [
        store.series(), store.series(device="leaf-ü"),
        store.segments(**window), store.segments(**window, devices=["leaf_0", "Leaf-1"]),
        store.segments(t0_ns=0, t1_ns=2**62, source="snmp"), store.segment_watermarks(),
        store.events(t0_ns=T0, t1_ns=T0 + 5 * S), store.events(t0_ns=0, t1_ns=2**62, limit=13),
        store.events(t0_ns=0, t1_ns=2**62, devices=["leaf-ü"], kind=EventKind.ANOMALY),
        store.int_paths(t0_ns=0, t1_ns=2**62), store.int_paths(**window, switch="spine-1"),
        store.staged_frames(), store.staged_frames(device="leaf-0", source="gnmi"),
    ]


@pytest.mark.integration
def test_sqlite_and_postgresql_answer_the_same(sqlite_url: str, postgresql_url: str) -> None:
    answers = []
    for url in (sqlite_url, postgresql_url):
        store = Store(StoreConfig(url=url))
        store.start()
        try:
            _fill(store)
            answers.append(_answers(store))
        finally:
            store.stop()
    assert answers[0] == answers[1]
    assert all(answers[0]), "every query found something"


def test_pipelines_sharing_a_store_prune_it_together_without_errors(db_url: str) -> None:
    """Every pipeline on a store prunes it, at about the same time: their deletes
    overlap, and none fails (no deadlock, no lock timeout); what expired is gone
    once, what did not is kept."""
    keeper = Store(StoreConfig(url=db_url, retention_s=3600))
    keeper.start()
    try:
        old = [samples.segment(f"leaf-{i % 50}", i // 50) for i in range(6_000)]
        keeper.put_segments(old)
        fresh = [samples.segment(f"spine-{i}", 200) for i in range(5)]
        keeper.put_segments(fresh)
        now = fresh[0].t_start_ns + 60 * S  # every old segment has expired, the fresh not
        deleted: list[int] = []
        errors: list[str] = []

        def prune() -> None:
            store = Store(StoreConfig(url=db_url, retention_s=3600))
            store.start()
            try:
                deleted.append(store.prune(now_ns=now, batch=500))
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                store.stop()

        threads = [threading.Thread(target=prune) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert errors == []
        assert sum(deleted) == len(old)
        left = keeper.segments(t0_ns=0, t1_ns=2**62)
        assert sorted(s.device for s in left) == sorted(s.device for s in fresh)
    finally:
        keeper.stop()
