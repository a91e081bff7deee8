"""The pipeline worker over a simulated fabric: lossless counters, bounded gauges,
exact states, idempotent restarts and bad input set aside with a reason."""

from __future__ import annotations

import logging
from collections import defaultdict

import numpy as np
import pytest

from fabricops.core.bus import Message, Topic, topic_name
from fabricops.core.catalogue import CATALOGUE, MetricKind
from fabricops.core.frame import Frame
from fabricops.core.records import EventKind
from fabricops.pipeline.keyframe import decode_block, gauge_bounds
from fabricops.pipeline.query import read_series
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.simulator.faults import FaultSpec
from fabricops.store.store import Store

from .conftest import Feed, small_sim

Key = tuple[str, str, str, int]  # device, source, entity, metric id
LINK = "agg-0-0:eth1~leaf-0-0:eth3"


def _series(frames: list[Frame]) -> dict[Key, tuple[list[int], list[int]]]:
    out: dict[Key, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for f in frames:
        for e, m, v in zip(f.entity_idx.tolist(), f.metric.tolist(), f.raw.tolist(), strict=True):
            ts, vals = out[(f.device, f.source.value, f.entities[e], m)]
            ts.append(f.ts_ns)
            vals.append(v)
    return out


def _stored(store: Store) -> dict[Key, tuple[list[int], list[int]]]:
    out: dict[Key, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for seg in store.segments(t0_ns=0, t1_ns=2**62):
        block = decode_block(seg.payload)
        for row, (entity, m) in enumerate(zip(block.entity, block.metric.tolist(), strict=True)):
            ts, vals = out[(seg.device, seg.source, entity, m)]
            keep = block.present[row]
            ts.extend(block.ts_ns[keep].tolist())
            vals.extend(block.raw[row][keep].tolist())
    return out


@pytest.mark.slow
def test_one_hour_run_keeps_counters_exact_gauges_in_bound_states_at_their_time(
    store: Store,
) -> None:
    sim = small_sim()
    sim.add_fault(FaultSpec(type="link_down", entity=LINK, start_s=1200, duration_s=300))
    sim.add_fault(FaultSpec(type="gray_loss", entity="agg-1-0:eth1~leaf-1-0:eth3",
                            start_s=2400, duration_s=600, params={"loss_rate": 1e-3}))
    feed = Feed(sim, store)
    results = feed.run(3600, batch_ticks=60)
    feed.worker.flush()
    assert feed.worker.windows.frames() == [], "every window closed into a segment"
    sent, kept = _series(feed.sent), _stored(store)
    assert kept.keys() == sent.keys()
    kinds = {"counter": 0, "gauge": 0, "state": 0}
    for key, (ts, vals) in sent.items():
        got_ts, got = kept[key]
        assert got_ts == ts, key
        kind = CATALOGUE.by_id(key[3]).kind
        kinds[kind.value] += 1
        if kind is MetricKind.GAUGE:
            a = np.array(vals, np.uint64).view(np.float64)
            b = np.array(got, np.uint64).view(np.float64)
            bound = gauge_bounds([key[3]])[0]
            assert np.all(np.abs(a - b) <= bound), key
        else:
            assert got == vals, key  # counters bit-exact, states at their exact times
    assert min(kinds.values()) > 0
    states = [e for r in results for e in r.events if e.kind is EventKind.STATE_CHANGE]
    assert {e.entity for e in states} >= set(LINK.split("~"))
    assert store.events(t0_ns=0, t1_ns=2**62, kind="state_change") == sorted(
        states, key=lambda e: (e.ts_ns, e.entity))


def _value(f: Frame, entity: str, metric_id: int) -> int:
    here = (f.metric == metric_id) & (np.array(f.entities)[f.entity_idx] == entity)
    return int(f.raw[here][0])


def test_a_series_reads_back_raw_and_as_rates_up_to_the_last_written_window(
        store: Store) -> None:
    feed = Feed(small_sim(), store)
    feed.run(150)  # two written windows and one open
    entity, metric = "leaf-0-0:eth1", "out_octets"
    mid = CATALOGUE.id_of(metric)
    written = store.newest_ns()
    assert written < max(f.ts_ns for f in feed.sent), "the open window is not in the store"
    data = read_series(store, entity=entity, metric=metric, t0_ns=0, t1_ns=2**62)
    assert data.ts_ns.tolist() == [f.ts_ns for f in feed.sent
                                   if f.device == "leaf-0-0" and f.ts_ns <= written]
    feed.worker.flush()
    sent = [(f.ts_ns, _value(f, entity, mid)) for f in feed.sent if f.device == "leaf-0-0"]
    data = read_series(store, entity=entity, metric=metric, t0_ns=0, t1_ns=2**62)
    assert data.ts_ns.tolist() == [t for t, _ in sent]
    assert data.values.tolist() == [v for _, v in sent]
    rates = read_series(store, entity=entity, metric=metric, t0_ns=0, t1_ns=2**62, rate=True)
    assert rates.values[-1] == pytest.approx(sent[-1][1] - sent[-2][1])
    part = read_series(store, entity=entity, metric=metric, t0_ns=sent[10][0],
                       t1_ns=sent[20][0])
    assert part.ts_ns.tolist() == [t for t, _ in sent[10:21]]
    assert store.newest_ns() == max(f.ts_ns for f in feed.sent)
    before = read_series(store, entity=entity, metric=metric, t0_ns=0, t1_ns=sent[0][0] - 1)
    assert before.ts_ns.tolist() == []  # a range before every segment
    assert before.values.tolist() == []


def _contents(store: Store) -> tuple[list[tuple[str, str, int, bytes]], list[object]]:
    segs = [(s.device, s.source, s.t_start_ns, s.payload)
            for s in store.segments(t0_ns=0, t1_ns=2**62)]
    return segs, list(store.events(t0_ns=0, t1_ns=2**62))


def test_a_worker_killed_mid_batch_loses_nothing_and_duplicates_nothing(
    store: Store, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from fabricops.store.store import StoreConfig  # a clean run to compare with
    clean_store = Store(StoreConfig(url=f"sqlite:///{tmp_path_factory.mktemp('c') / 'c.db'}"))
    clean_store.start()
    clean = Feed(small_sim(seed=5), clean_store)
    clean.sim.add_fault(FaultSpec(type="link_down", entity=LINK, start_s=70, duration_s=30))
    clean.run(200)
    clean.worker.flush()

    feed = Feed(small_sim(seed=5), store)
    feed.sim.add_fault(FaultSpec(type="link_down", entity=LINK, start_s=70, duration_s=30))
    feed.run(100)

    class KilledError(Exception):
        pass

    def die(*_: object, **__: object) -> int:
        raise KilledError  # after the events, before the window is written

    feed.worker.store.close_windows = die  # type: ignore[method-assign]
    with pytest.raises(KilledError):
        feed.run(40)
    feed.consumer.close()  # the process is gone; nothing of its last batch was committed
    store.close_windows = Store.close_windows.__get__(store)  # type: ignore[method-assign]
    committed = feed.bus.committed(feed.config.group, feed.consumer.topics[0])
    assert sum(committed.values()) < sum(feed.bus.end_offsets(feed.consumer.topics[0])), \
        "the frames of the unwritten windows are still uncommitted on the bus"

    restarted = Feed(feed.sim, store, bus=feed.bus)
    restarted.sent = feed.sent
    restarted.worker.restore()
    assert feed.sim.tick == 120, "the kill came in the batch of ticks 101-120"
    restarted.run(80)  # the re-delivered batch first, then the rest of the run
    restarted.worker.flush()
    assert _contents(store) == _contents(clean_store)
    clean_store.stop()


def _frame(ts_ns: int, seq: int, values: list[int], metric: str = "in_octets") -> Frame:
    return Frame.build("leaf-9", ts_ns, "gnmi", seq, ["leaf-9:eth1", "leaf-9:eth2",
                                                      "leaf-9:eth3"], [metric] * 3, values)


def _msgs(*payloads: bytes) -> list[Message]:
    topic = topic_name(Topic.TELEMETRY)
    return [Message(topic, 0, i, b"leaf-9", p, 0) for i, p in enumerate(payloads)]


def test_bad_input_is_set_aside_counted_and_explained(
    store: Store, caplog: pytest.LogCaptureFixture,
) -> None:
    from fabricops.core.membus import MemoryBus
    now = 1_800_000_030 * 10**9  # mid-window: the frames stay staged
    worker = PipelineWorker(PipelineConfig(max_future_s=60), MemoryBus(), store,
                            clock_ns=lambda: now)
    good = _frame(now - 2 * 10**9, 1, [1000, 2000, 3000])
    unknown = Frame(good.device, now - 10**9, good.source, 2, good.entities, good.entity_idx,
                    np.array([1, 1, 999], np.uint16), np.array([1500, 2500, 7], np.uint64))
    backwards = _frame(now, 3, [2000, 1000, 4000])
    future = _frame(now + 3600 * 10**9, 4, [9, 9, 9])
    with caplog.at_level(logging.WARNING, logger="fabricops.pipeline.worker"):
        result = worker.process(_msgs(good.encode(), b"\x00garbage", unknown.encode(),
                                      backwards.encode(), future.encode(), good.encode()))
    assert result.rejected == {"undecodable": 1, "unknown_metric": 1, "counter_backwards": 1,
                               "future": 1, "duplicate": 1}
    assert result.frames == 3
    text = caplog.text
    assert "[999]" in text
    assert "not in the catalogue" in text
    assert "in_octets of leaf-9:eth2 went down" in text
    assert "past the allowed clock skew" in text
    assert worker.metrics.rejected.labels("future")._value.get() == 1
    staged = worker.windows.frames()
    assert [f.seq for f in staged] == [1, 2, 3], "the good part of every frame is kept"
    assert staged[1].metric.tolist() == [1, 1]
