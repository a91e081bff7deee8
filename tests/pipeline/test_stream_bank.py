"""Streams stepped together in one bank give what each gives stepped alone: the same
events in the same order, the same counters gone backwards and resets, the same state
to resume from."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.records import EventKind
from fabricops.pipeline.events import EventConfig, EventRules, ThresholdRule
from fabricops.pipeline.stream import SeriesStream
from fabricops.pipeline.stream_bank import StepQueue, StepResult, StreamBank

T0 = 1_800_000_000 * 10**9
COUNTERS = ("in_octets", "out_octets", "in_errors", "pfc_rx_pause{prio=3}", "cnp_sent")
GAUGES = ("temperature_c", "rx_power_dbm", "queue_depth_bytes")


def _frames(device: str, rng: np.random.Generator, n: int) -> list[Frame]:
    """``n`` frames of one device whose ports, counters and gauges do what real ones
    do now and then: a port comes or goes, a link flaps, errors start and stop, the
    counters wrap, one goes backwards, the device resets them all, a rate spikes."""
    ports = [f"{device}:eth{p}" for p in range(int(rng.integers(1, 5)))]
    total = {(p, m): int(rng.integers(0, 1 << 40)) for p in ports for m in COUNTERS}
    total[(ports[0], "in_octets")] = (1 << 64) - 10**12  # wraps soon
    out, ts = [], T0 + int(rng.integers(0, 10**9))
    for k in range(n):
        ts += int(rng.choice([10**9, 10**9, 10**8, 3 * 10**9]))
        if k == n // 2:
            ports = [*ports, f"{device}:eth9"]  # a port appears: a new layout
        event = rng.random()
        entities, metrics, values = [], [], []
        for p in ports:
            for m in COUNTERS:
                step = int(rng.integers(0, 10**9)) if "octets" in m or m == "cnp_sent" else \
                    int(rng.integers(0, 3) * rng.integers(0, 3000) * (rng.random() < 0.3))
                if event < 0.04 and m == "cnp_sent":
                    step *= 200  # a spike: an anomaly once warmed up
                value = total.get((p, m), 0) + step
                if event > 0.97:
                    value = int(rng.integers(0, 1000))  # the device reset its counters
                elif event > 0.95 and m == "in_errors":
                    value = max(0, total.get((p, m), 0) - 5)  # backwards, alone
                total[(p, m)] = value % (1 << 64)
                entities.append(p)
                metrics.append(m)
                values.append(total[(p, m)])
            for m in GAUGES:
                entities.append(p)
                metrics.append(m)
                values.append(float(rng.choice([40.0, 80.0, -5.0, -20.0, np.nan, 1e5])))
            entities.append(p)
            metrics.append("oper_status")
            values.append(int(rng.choice([1, 1, 1, 2])))
        out.append(Frame.build(device, ts, "gnmi", k, entities, metrics, values))
    return out


def _seen(result: StepResult) -> tuple[object, ...]:
    return (result.reset, tuple(result.backwards),
            tuple((e.ts_ns, e.device, e.entity, e.metric, e.kind, e.value, e.severity, e.detail)
                  for e in result.events))


def _state(stream: SeriesStream) -> tuple[object, ...]:
    return (stream.last_ts_ns, tuple(stream._keys),
            tuple(stream.column(k).tobytes() for k in SeriesStream._ARRAYS))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_streams_stepped_together_give_what_each_gives_alone(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rules = EventRules(EventConfig(anomaly_warmup=5))
    devices = {f"leaf-{d}": _frames(f"leaf-{d}", rng, 80) for d in range(7)}
    alone = {d: SeriesStream(d, "gnmi", rules) for d in devices}
    expected = {d: [_seen(alone[d].step(f)) for f in frames] for d, frames in devices.items()}
    assert sum(len(s[2]) for runs in expected.values() for s in runs) > 50, "events to compare"
    assert any(s[0] for runs in expected.values() for s in runs), "a reset to compare"
    assert any(s[1] for runs in expected.values() for s in runs), "a counter gone backwards"

    bank = StreamBank(rules)
    together = {d: SeriesStream(d, "gnmi", rules, bank) for d in devices}
    queue = StepQueue(bank)
    got: dict[str, list[tuple[object, ...]]] = {d: [] for d in devices}
    order = [(d, f) for k in range(80) for d, frames in devices.items() for f in frames[k:k + 1]]
    at = 0
    while at < len(order):  # batches of uneven size: some hold several frames of a stream
        batch = order[at:at + int(rng.integers(1, 30))]
        at += len(batch)
        for d, f in batch:
            assert queue.last_ts_ns(together[d]) is None or queue.last_ts_ns(together[d]) < f.ts_ns
            queue.add(together[d], f, emit=True)
        done = queue.run()
        assert [(s.device, f.ts_ns) for s, f, _ in done] == [(d, f.ts_ns) for d, f in batch]
        for stream, _, result in done:
            got[stream.device].append(_seen(result))
    assert got == expected
    for d in devices:
        assert _state(together[d]) == _state(alone[d])
        again = SeriesStream.resume(d, "gnmi", rules, together[d].snapshot(), StreamBank(rules))
        assert _state(again) == _state(alone[d])


def _only(frame: Frame, metrics: tuple[str, ...]) -> Frame:
    """``frame`` with only the samples of ``metrics``."""
    names = [CATALOGUE.by_id(m).name for m in frame.metric.tolist()]
    keep = [i for i, name in enumerate(names) if name in metrics]
    values = [float(frame.raw[i:i + 1].view(np.float64)[0]) if names[i] in GAUGES
              else int(frame.raw[i]) for i in keep]
    return Frame.build(frame.device, frame.ts_ns, frame.source, frame.seq,
                       [frame.entities[frame.entity_idx[i]] for i in keep],
                       [names[i] for i in keep], values)


@pytest.mark.parametrize("seed", [4, 5])
def test_devices_with_and_without_counters_states_or_rules_step_together_as_alone(
    seed: int,
) -> None:
    """A pass may join layouts that lack a kind of sample (no counters, no state, no
    threshold rule, nothing watched): each still gets what it gets alone."""
    rng = np.random.default_rng(seed)
    rules = EventRules(EventConfig(anomaly_warmup=5))
    kinds = [COUNTERS, GAUGES, ("oper_status",), (*GAUGES, "oper_status"),
             ("in_octets",), (*COUNTERS, *GAUGES, "oper_status")]
    devices = {f"dev-{d}": [_only(f, kinds[d]) for f in _frames(f"dev-{d}", rng, 40)]
               for d in range(len(kinds))}
    alone = {d: SeriesStream(d, "gnmi", rules) for d in devices}
    expected = {d: [_seen(alone[d].step(f)) for f in frames] for d, frames in devices.items()}
    assert sum(len(s[2]) for runs in expected.values() for s in runs) > 20, "events to compare"
    bank = StreamBank(rules)
    together = {d: SeriesStream(d, "gnmi", rules, bank) for d in devices}
    got: dict[str, list[tuple[object, ...]]] = {d: [] for d in devices}
    for k in range(40):
        items = [(together[d], frames[k]) for d, frames in devices.items()]
        for (stream, _), result in zip(items, bank.step(items), strict=True):
            got[stream.device].append(_seen(result))
    assert got == expected
    for d in devices:
        assert _state(together[d]) == _state(alone[d])


def test_a_frame_queued_without_emit_warms_its_stream_up_and_raises_nothing() -> None:
    rules = EventRules(EventConfig())
    stream = SeriesStream("leaf-1", "gnmi", rules)
    queue = StepQueue(stream.bank)
    frames = [Frame.build("leaf-1", T0 + s * 10**9, "gnmi", s, ["leaf-1:eth0"],
                          ["oper_status"], [1 + s % 2]) for s in range(3)]
    for f in frames[:2]:
        queue.add(stream, f, emit=False)
    assert queue.last_ts_ns(stream) == frames[1].ts_ns
    assert stream.last_ts_ns is None
    assert [r.events for _, _, r in queue.run()] == [[], []]
    assert stream.last_ts_ns == frames[1].ts_ns
    queue.add(stream, frames[2], emit=True)
    [(_, _, result)] = queue.run()
    assert [e.detail for e in result.events] == ["2 -> 1"]


def test_a_frame_at_its_streams_last_time_gives_no_rate() -> None:
    """The worker never steps such a frame (it is a duplicate or late); a caller that
    does gets no rate, so no threshold on one, rather than a division by zero."""
    stream = SeriesStream("leaf-1", "gnmi", EventRules(EventConfig()))
    stream.step(Frame.build("leaf-1", T0, "gnmi", 0, ["leaf-1:eth0"], ["in_errors"], [10]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = stream.step(Frame.build("leaf-1", T0, "gnmi", 1, ["leaf-1:eth0"],
                                        ["in_errors"], [500]))
    assert again.events == []
    later = stream.step(Frame.build("leaf-1", T0 + 10**9, "gnmi", 2, ["leaf-1:eth0"],
                                    ["in_errors"], [600]))
    assert [(e.kind, e.value) for e in later.events] == [(EventKind.THRESHOLD, 100.0)]


def test_a_counters_rate_is_over_the_time_since_its_own_last_value() -> None:
    """A state change sent on its own between two samples (a gNMI ON_CHANGE update) is
    a frame of the stream too; the octets' rate at the next sample is still over the
    second since the octets' last value, not the half since that frame."""
    rule = ThresholdRule(metric="in_octets", limit=1500.0)
    stream = SeriesStream("leaf-1", "gnmi", EventRules(EventConfig(thresholds=(rule,))))
    ports = ["leaf-1:eth1", "leaf-1:eth2"]
    stream.step(Frame.build("leaf-1", T0, "gnmi", 0, ports, ["in_octets"] * 2, [0, 0]))
    stream.step(Frame.build("leaf-1", T0 + 10**9 // 2, "gnmi", 1, ["leaf-1:eth2"],
                            ["oper_status"], [2]))
    at_1s = stream.step(Frame.build("leaf-1", T0 + 10**9, "gnmi", 2, ports,
                                    ["in_octets"] * 2, [1000, 2000]))
    assert [(e.entity, e.value) for e in at_1s.events] == [("leaf-1:eth2", 2000.0)]
    at_2s = stream.step(Frame.build("leaf-1", T0 + 2 * 10**9, "gnmi", 3, ["leaf-1:eth1"],
                                    ["in_octets"], [4000]))
    assert [(e.entity, e.value) for e in at_2s.events] == [("leaf-1:eth1", 3000.0)]
    at_3s = stream.step(Frame.build("leaf-1", T0 + 3 * 10**9, "gnmi", 4, ports,
                                    ["in_octets"] * 2, [5000, 3000]))
    # eth1: 1000 in the second since its value at 2 s; eth2: 1000 over the two seconds
    # since its value at 1 s, 500/s
    assert [(e.entity, e.kind, e.value) for e in at_3s.events] == [
        ("leaf-1:eth1", EventKind.CLEARED, 1000.0), ("leaf-1:eth2", EventKind.CLEARED, 500.0)]
