"""The physics a network engineer would check on the simulated fabric."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fabricops.simulator import physics as ph
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.workload import JobSpec

from .conftest import STREAM, busiest_fabric_link, crossing

Make = Callable[..., Simulator]


def _port_deltas(sim: Simulator, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    before = {n: sim.telemetry.counter(n).copy() for n in names}
    sim.step()
    return {n: (sim.telemetry.counter(n) - before[n]).astype(np.int64) for n in names}


def test_conservation_on_every_link_and_tick(streaming: Make) -> None:
    sim = streaming()
    sim.run(3)
    link = busiest_fabric_link(sim)
    sim.add_fault(FaultSpec(type="gray_loss", entity=sim.fabric.link_ids[link],
                            start_s=sim.time_s, params={"loss_rate": 0.01}))
    other = sim.fabric.link_ids[(link + 7) % sim.fabric.n_links]
    sim.add_fault(FaultSpec(type="link_down", entity=other, start_s=sim.time_s + 2))
    fab = sim.fabric
    names = ("out_pkts", "in_pkts", "in_errors", "out_octets", "in_octets")
    errors_seen = 0
    for _ in range(8):
        d = _port_deltas(sim, names)
        a, b = fab.ch_tx_port, fab.ch_rx_port
        assert np.array_equal(d["out_pkts"][a], d["in_pkts"][b] + d["in_errors"][b])
        assert np.array_equal(d["out_octets"][a], d["in_octets"][b])
        errors_seen += int(d["in_errors"].sum())
    assert errors_seen > 0, "the lossy link must have dropped frames for the check to bite"


def _agg_uplink_cv(seeds: str) -> float:
    sim = Simulator(fat_tree(k=8), SimConfig(ecmp_seeds=seeds, seed=1))  # type: ignore[arg-type]
    sim.add_job(JobSpec(hosts=128, placement="random", qps_per_pair=4, **STREAM))  # type: ignore[arg-type]
    sim.run(4)
    fab = sim.fabric
    names = np.array(fab.node_ids)
    tx, rx = names[fab.ch_tx_node()], names[fab.ch_rx_node()]
    up = np.char.startswith(tx, "agg") & np.char.startswith(rx, "core")
    assert sim.last is not None
    util = sim.last.utilization(fab.ch_capacity_bps)[up]
    return float(util.std() / util.mean())


def test_identical_hash_seeds_polarize_uplinks() -> None:
    distinct, identical = _agg_uplink_cv("distinct"), _agg_uplink_cv("identical")
    assert identical > 2.0 * distinct, (distinct, identical)


def _goodput_ratio(make: Make, loss_rate: float) -> float:
    control, faulty = make(), make()
    control.run(3)
    faulty.run(3)
    link = busiest_fabric_link(faulty)
    faulty.add_fault(FaultSpec(type="gray_loss", entity=faulty.fabric.link_ids[link],
                               start_s=faulty.time_s, params={"loss_rate": loss_rate}))
    control.run(3)
    faulty.run(3)
    mask = crossing(faulty, link)
    assert control.last is not None
    assert faulty.last is not None
    return float(faulty.last.goodput_bps[mask].sum() / control.last.goodput_bps[mask].sum())


def test_gray_loss_cuts_roce_goodput_by_go_back_n(streaming: Make) -> None:
    assert _goodput_ratio(streaming, 1e-3) < 0.6
    assert _goodput_ratio(streaming, 1e-6) > 0.99


def test_pfc_storm_spreads_upstream_and_slows_victims(streaming: Make) -> None:
    control, storm = streaming(), streaming()
    control.run(5)
    storm.run(5)
    nic = "host-010:nic3"
    storm.add_fault(FaultSpec(type="pfc_storm", entity=nic, start_s=storm.time_s))
    fab, tel = storm.fabric, storm.telemetry
    rx_pause = "pfc_rx_pause{prio=3}"
    tor_port = fab.port_index(fab.topology.attachment(nic))
    spine_ports = np.array([p.startswith("spine") for p in fab.port_ids])
    before = tel.counter(rx_pause).copy()
    spread_at = None
    for tick in range(6):
        control.step()
        storm.step()
        grown = tel.counter(rx_pause) > before
        assert grown[tor_port], "the ToR port facing the storming NIC is paused every tick"
        if spread_at is None and grown[spine_ports].any():
            spread_at = tick
    assert spread_at is not None
    assert spread_at <= 4
    nic_index = fab.port_nic[fab.port_index(nic)]
    flows = storm.workload.flows
    victims = (flows.src_nic != nic_index) & (flows.dst_nic != nic_index)
    assert control.last is not None
    assert storm.last is not None
    slowed = storm.last.goodput_bps[victims] < 0.95 * control.last.goodput_bps[victims]
    assert slowed.sum() >= 1


def test_link_down_traffic_moves_after_convergence(streaming: Make) -> None:
    sim = streaming(convergence_delay_s=2.0)
    sim.run(3)
    link = busiest_fabric_link(sim)
    crossed = crossing(sim, link) & sim.workload.flows.active
    assert crossed.any()
    sim.add_fault(FaultSpec(type="link_down", entity=sim.fabric.link_ids[link],
                            start_s=sim.time_s))
    discards = sim.telemetry.counter("out_discards").sum()
    sim.step()
    assert sim.last is not None
    assert np.all(sim.last.goodput_bps[crossed] == 0.0), "black-holed until routing converges"
    assert sim.telemetry.counter("out_discards").sum() > discards
    sim.run(3)
    assert not crossing(sim, link)[sim.workload.flows.active].any()
    assert np.all(sim.last.goodput_bps[crossed] > 0.0)


def test_switch_reboot_resets_counters_and_others_stay_monotonic(streaming: Make) -> None:
    sim = streaming()
    sim.run(3)
    sim.add_fault(FaultSpec(type="switch_down", entity="spine-2", start_s=sim.time_s,
                            duration_s=3))
    fab, tel = sim.fabric, sim.telemetry
    spine = np.array([p.startswith("spine-2:") for p in fab.port_ids])
    octets_before = tel.counter("out_octets")[spine].sum()
    previous = tel.port_counters.copy()
    reporting = []
    for _ in range(6):
        sim.step()
        reporting.append("spine-2" in {f.device for f in sim.frames()})
        now = tel.port_counters
        assert np.all(now[:, ~spine] >= previous[:, ~spine]), "counters never go backwards"
        previous = now.copy()
    assert reporting == [False, False, False, True, True, True]
    assert tel.counter("out_octets")[spine].sum() < octets_before


def test_same_seed_same_bytes(streaming: Make) -> None:
    def telemetry(seed: int) -> list[bytes]:
        sim = streaming(seed=seed)
        sim.add_fault(FaultSpec(type="gray_loss", entity="leaf-3:eth33~spine-0:eth13",
                                start_s=2, params={"loss_rate": 1e-3}))
        out = []
        for _ in range(5):
            sim.step()
            out.extend(f.encode() for f in sim.frames())
        return out

    first, second, other = telemetry(5), telemetry(5), telemetry(6)
    assert first == second
    assert first != other


def test_counters_wrap_at_64_bits(streaming: Make) -> None:
    sim = streaming()
    sim.run(2)
    row = sim.telemetry.counter("out_octets")
    busy = int(np.argmax(row))
    row[busy] = np.uint64(2**64 - 10)
    sim.step()
    assert int(row[busy]) < 2**40, "the counter wrapped past 2**64 like the hardware's"


def test_path_loss_of_a_healthy_fabric_is_what_the_full_product_gives() -> None:
    """With no loss on any channel the per-flow product is skipped; the result must be
    the very values (signs of zero included) the product gives, and any loss anywhere
    takes the full product."""
    rng = np.random.default_rng(3)
    epath = np.asfortranarray(rng.integers(0, 50, (200, 4)).astype(np.int32))

    def full(prob: np.ndarray) -> np.ndarray:
        keep = np.log1p(-np.clip(prob, 0.0, 1.0 - 1e-12))
        return np.asarray(-np.expm1(keep[epath].sum(axis=1)))

    for prob in (np.zeros(51), np.where(np.arange(51) % 2 == 0, -0.0, 0.0),
                 np.where(np.arange(51) == 7, 1e-3, 0.0)):
        got = ph.path_product_complement(epath, prob)
        assert got.tobytes() == full(prob).tobytes()
    lossy = np.where(np.arange(51) == 7, 1e-3, 0.0)
    assert (ph.path_product_complement(epath, lossy) > 0).sum() == (epath == 7).any(axis=1).sum()
