"""Folding a batch of frames at once gives exactly what folding them one by one gives."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.core.frame import Frame, Source
from fabricops.rca import view as view_module
from fabricops.rca.view import FabricView, PortIndex, fresh_cells
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec


def _ticks(n: int) -> tuple[PortIndex, list[list[Frame]]]:
    topo = leaf_spine(gpus=32, nics_per_host=4, leaf_radix=8, spine_radix=8)
    sim = Simulator(topo, SimConfig(seed=4))
    sim.add_job(JobSpec(hosts=8, placement="random", compute_s=0.2, comm_bytes_per_nic=2e9))
    ticks = []
    for _ in range(n):
        sim.step()
        ticks.append(sim.frames())
    return PortIndex(topo), ticks


def _state(view: FabricView) -> list[np.ndarray]:
    snap = view.snapshot()
    return [view._values, view._raw, view._raw_ok, view._cell_ts, view._port_ts,
            view._node_ts, view.freshness.limit_ns(), snap.values, snap.port_fresh,
            snap.node_fresh, np.array([view.frames_seen, view.frames_other_source,
                                       view.samples_unknown, view.newest_ns])]


def _same(a: FabricView, b: FabricView) -> None:
    for x, y in zip(_state(a), _state(b), strict=True):
        assert np.array_equal(x, y, equal_nan=True)


@pytest.mark.parametrize("fold_samples", [1 << 16, 50])
def test_batches_of_several_ticks_in_any_device_order_equal_one_by_one(
    monkeypatch: pytest.MonkeyPatch, fold_samples: int,
) -> None:
    monkeypatch.setattr(FabricView, "FOLD_SAMPLES", fold_samples)  # 50: rounds in parts
    index, ticks = _ticks(9)
    snmp = [Frame.build("leaf-0", f.ts_ns + 300_000_000, Source.SNMP, f.seq,
                        ["leaf-0:eth1"], ["in_octets"], [10**6 * k])
            for k, f in enumerate(next(f for f in t if f.device == "leaf-0") for t in ticks)]
    stranger = Frame.build("no-such-switch", ticks[0][0].ts_ns, Source.GNMI, 1, ["x:eth1"],
                           ["in_octets"], [5])
    stream: list[Frame] = []
    for k, tick in enumerate(ticks):
        stream += list(reversed(tick)) if k % 2 else tick
        stream.append(snmp[k])
    stream.insert(3, stranger)
    one = FabricView(index)
    for frame in stream:
        one.ingest([frame])
    batched = FabricView(index)
    for lo in range(0, len(stream), 3 * len(ticks[0]) // 2):  # batches straddle ticks
        batched.ingest(stream[lo:lo + 3 * len(ticks[0]) // 2])
    _same(one, batched)
    assert batched.frames_other_source > 0
    assert batched.samples_unknown == 1


def test_a_failover_inside_a_batch_does_not_rate_across_sources() -> None:
    index, _ = _ticks(1)
    port = "leaf-0:eth1"
    s = 10**9

    def sample(ts_s: float, octets: int, source: str) -> Frame:
        return Frame.build("leaf-0", int(ts_s * s), source, 0, [port], ["out_octets"],
                           [octets])

    frames = [sample(0, 1_000, "gnmi"), sample(1, 2_000, "gnmi"), sample(9, 9_000_000, "snmp"),
              sample(10, 9_000_500, "snmp")]
    one, batched = FabricView(index, stale_s=2.0), FabricView(index, stale_s=2.0)
    for f in frames:
        one.ingest([f])
    batched.ingest(frames)
    _same(one, batched)
    assert batched.snapshot().col("out_octets")[index.port_of[port]] == 500.0


def test_a_device_that_reports_another_devices_port_is_folded_in_order() -> None:
    """leaf-1 relays a sample of leaf-0's port at the time of leaf-0's own: one by one,
    the second sample of that time is not newer and is ignored."""
    index, _ = _ticks(1)
    mine = [Frame.build("leaf-0", t * 10**9, Source.GNMI, t, ["leaf-0:eth1"], ["in_octets"],
                        [100 * t]) for t in range(2)]
    relayed = Frame.build("leaf-1", 0, Source.GNMI, 9, ["leaf-0:eth1"], ["in_octets"], [50])
    frames = [mine[0], relayed, mine[1]]
    one, batched = FabricView(index), FabricView(index)
    for f in frames:
        one.ingest([f])
    batched.ingest(frames)
    _same(one, batched)
    assert batched.snapshot().col("in_octets")[index.port_of["leaf-0:eth1"]] == 100.0


def test_pause_counters_of_every_priority_are_summed_into_one_rate() -> None:
    index, _ = _ticks(1)
    names = ["pfc_rx_pause{prio=3}", "pfc_rx_pause{prio=4}", "in_octets"]

    def frame(t: int, values: list[int]) -> Frame:
        return Frame.build("leaf-0", t * 10**9, Source.GNMI, t, ["leaf-0:eth2"] * 3, names,
                           values)

    view = FabricView(index)
    view.ingest([frame(0, [10, 100, 2**64 - 5]), frame(1, [20, 130, 2**64 - 1])])
    snap = view.snapshot()
    p = index.port_of["leaf-0:eth2"]
    assert snap.col("pfc_rx_pause")[p] == 40.0
    assert snap.col("in_octets")[p] == 4.0, "a counter near 2**64 stays exact"


def test_fresh_cells_are_those_within_their_rows_limit() -> None:
    rng = np.random.default_rng(5)
    for now in (0, 7, 1_764_000_000_000_000_000, 2**62 + 5):
        cell_ts = now - rng.integers(-3, 12, (200, 6))
        cell_ts[rng.random(cell_ts.shape) < 0.1] = -1  # never reported
        limit = rng.choice([-2.5, -1.0, 0.0, 0.5, 3.0, 3.7, 10.0], 200)
        for odd in (None, np.nan, np.inf, -np.inf, 2.0**70):
            lim = limit.copy()
            if odd is not None:
                lim[3] = odd
            want = (cell_ts >= 0) & (now - cell_ts <= lim[:, None])
            assert np.array_equal(fresh_cells(cell_ts, now, lim), want), (now, odd)


def test_folding_runs_of_ports_in_place_equals_gathering_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index, ticks = _ticks(6)
    runs: list[bool] = []
    real = view_module.run_of

    def seen(ports: np.ndarray) -> slice | None:
        run = real(ports)
        runs.append(run is not None)
        return run

    monkeypatch.setattr(view_module, "run_of", seen)
    in_place = FabricView(index)
    for tick in ticks:
        in_place.ingest(tick)
    assert any(runs), "a tick of whole devices in port order is one run"
    monkeypatch.setattr(view_module, "run_of", lambda ports: None)
    gathered = FabricView(index)
    for tick in ticks:
        gathered.ingest(tick)
    _same(in_place, gathered)
