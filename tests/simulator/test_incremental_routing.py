"""After a link change or a WCMP change only some flows are routed again; the result
must be exactly what routing every flow again gives."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.core.topology import Topology
from fabricops.simulator.builders import fat_tree, leaf_spine, rail_optimized
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.fabric import Fabric
from fabricops.simulator.routing import Router
from fabricops.simulator.workload import JobSpec

SHAPES = {
    "fat_tree k=6 2:1": lambda: fat_tree(k=6, oversubscription=2.0),
    "leaf_spine 256": lambda: leaf_spine(gpus=256, leaf_radix=32, spine_radix=32),
    "rail_optimized 256": lambda: rail_optimized(gpus=256, rails=8, leaf_radix=16,
                                                 spine_radix=16),
}


def _sim(topo: Topology) -> Simulator:
    sim = Simulator(topo, SimConfig(seed=5))
    hosts = sum(1 for _ in topo.hosts())
    sim.add_job(JobSpec(hosts=hosts - 2, placement="random", compute_s=0.0,
                        comm_bytes_per_nic=1e15))
    sim.run(1)
    return sim


def _full(sim: Simulator) -> tuple[np.ndarray, np.ndarray]:
    """Paths and routability of every active flow, all routed from scratch."""
    fl = sim.workload.flows
    active = np.flatnonzero(fl.active)
    key_l4, key_l3 = fl.keys(active)
    paths, ok = sim.router.route(fl.src_nic[active], fl.dst_nic[active], key_l4, key_l3)
    return paths, ok


def _same(sim: Simulator) -> None:
    paths, ok = _full(sim)
    active = np.flatnonzero(sim.workload.flows.active)
    have = sim.paths[active]
    width = max(have.shape[1], paths.shape[1])
    pad = sim.fabric.dummy_channel

    def wide(a: np.ndarray) -> np.ndarray:
        return np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=pad)

    assert np.array_equal(wide(have), wide(paths))
    assert np.array_equal(sim.routable[active], ok)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_link_changes_reroute_exactly_the_flows_they_move(shape: str) -> None:
    sim = _sim(SHAPES[shape]())
    rng = np.random.default_rng(1)
    links, moved = sim.fabric.n_links, 0
    for _ in range(12):  # links go down and come back, several at a time
        old = sim.router.dist
        chosen = rng.choice(links, size=int(rng.integers(1, 4)), replace=False)
        sim.router.link_up[chosen] = ~sim.router.link_up[chosen]
        sim.router.refresh()
        channels = np.concatenate((2 * chosen, 2 * chosen + 1)).astype(np.int32)
        before = sim.paths.copy()
        sim.reroute_changed(old, channels)
        _same(sim)
        width = min(before.shape[1], sim.paths.shape[1])
        moved += int((before[:, :width] != sim.paths[:len(before), :width]).any(axis=1).sum())
    assert moved > 0, "the changes moved some flows"


def test_a_link_down_moves_its_flows_and_leaves_unrelated_ones_alone() -> None:
    sim = _sim(leaf_spine(gpus=256, leaf_radix=32, spine_radix=32))
    busy = np.bincount(sim.paths[:, 1] // 2, minlength=sim.fabric.n_links)
    link = int(np.argmax(busy))
    on_link = (sim.paths // 2 == link).any(axis=1)
    old = sim.router.dist
    sim.router.link_up[link] = False
    sim.router.refresh()
    stale = sim.router.stale(old, np.array([2 * link, 2 * link + 1], np.int32), sim.paths,
                             sim.workload.flows.dst_nic, sim.routable)
    assert stale[on_link].all(), "every flow over the failed link is routed again"
    assert stale.sum() < 0.5 * len(stale), "flows far from the change are left as they are"
    sim.reroute_changed(old, np.array([2 * link, 2 * link + 1], np.int32))
    assert not (sim.paths // 2 == link).any(), "no flow is left on the failed link"
    _same(sim)


def test_a_wcmp_drain_reroutes_exactly() -> None:
    sim = _sim(fat_tree(k=6))
    fab = sim.fabric
    busy = np.bincount(sim.paths[:, 1], minlength=fab.n_channels + 1)[:fab.n_channels]
    busy[fab.node_is_host[fab.port_node[fab.ch_rx_port]]] = 0  # switch-to-switch only
    tx_port = int(fab.ch_tx_port[int(np.argmax(busy))])  # the busiest leaf uplink
    node = int(fab.port_node[tx_port])
    uplinks = [p for p in fab.node_ports(node) if fab.port_tx_ch[p] >= 0 and not
               fab.node_is_host[fab.port_node[fab.ch_rx_port[fab.port_tx_ch[p]]]]]
    other = next(fab.port_ids[p] for p in uplinks if p != tx_port)
    sim.control.set_wcmp_weights(fab.node_ids[node], {fab.port_ids[tx_port]: 0, other: 3})
    _same(sim)
    assert not (sim.paths == fab.port_tx_ch[tx_port]).any(), "a drained port carries no flow"


def _count_searches(router: Router, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of targets of each distance search ``router`` makes from now on."""
    searched: list[int] = []
    search = router._search

    def counted(up: np.ndarray, targets: np.ndarray) -> np.ndarray:
        searched.append(len(targets))
        return search(up, targets)

    monkeypatch.setattr(router, "_search", counted)
    return searched


def _from_scratch(router: Router) -> np.ndarray:
    """Hop distances to every target searched from scratch (unmonkeypatched)."""
    return Router._search(router, router.link_up[router._inter_ch // 2], router.targets)


def _switch_links(fab: Fabric, node: int) -> np.ndarray:
    """Every link of switch ``node``."""
    ports = np.asarray(fab.node_ports(node))
    return np.unique(fab.port_tx_ch[ports[fab.port_tx_ch[ports] >= 0]] // 2)


@pytest.mark.parametrize("shape", [*SHAPES, "fat_tree k=8"])
def test_distances_after_each_link_change_equal_a_search_from_scratch(
    shape: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    topo = fat_tree(k=8) if shape == "fat_tree k=8" else SHAPES[shape]()
    router = _sim(topo).router
    fab = router.fabric
    searched = _count_searches(router, monkeypatch)
    rng = np.random.default_rng(7)
    for step in range(48):
        if step % 4 == 3:  # a whole switch cut off, or back
            links = _switch_links(fab, int(rng.choice(fab.switch_nodes)))
            router.link_up[links] = not router.link_up[links].all()
        else:  # a few links flip
            links = rng.choice(fab.n_links, size=int(rng.integers(1, 4)), replace=False)
            router.link_up[links] = ~router.link_up[links]
        old = router.dist
        router.refresh()
        expected = _from_scratch(router)
        assert np.array_equal(router.dist, expected), f"change {step}"
        assert router.dist is old or not np.shares_memory(router.dist, old), \
            "the distances before the change are left as they were"
    assert searched, "some changes needed a search"
    assert min(searched) < len(router.targets), "some changes searched fewer targets"
    assert searched.count(len(router.targets)) < len(searched) // 2, \
        "most changes did not search every target again"


def test_a_switch_cut_off_and_back_searches_only_the_targets_it_was_the_way_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    router = _sim(fat_tree(k=8)).router
    fab = router.fabric
    searched = _count_searches(router, monkeypatch)
    agg = next(i for i, node in enumerate(fab.switch_nodes)
               if fab.node_ids[node].startswith("agg-0-"))
    links = _switch_links(fab, int(fab.switch_nodes[agg]))
    for state in (False, True):
        router.link_up[links] = state
        router.refresh()
        assert np.array_equal(router.dist, _from_scratch(router))
    # it is its cores' only way into pod 0: pod 0's 4 leaves, cut off and back
    assert searched == [4, 4], f"targets searched again: {searched} of {len(router.targets)}"


def test_decisions_marked_one_by_one_equal_those_of_the_adjacency_product(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fabricops.simulator import routing

    router = _sim(fat_tree(k=8)).router
    rng = np.random.default_rng(3)
    for _ in range(12):
        links = rng.choice(router.fabric.n_links, size=int(rng.integers(1, 6)), replace=False)
        old = router.dist
        router.link_up[links] = ~router.link_up[links]
        router.refresh()
        channels = np.concatenate((2 * links, 2 * links + 1)).astype(np.int32)
        one_by_one = router.decisions_changed(old, channels)
        monkeypatch.setattr(routing, "_SCATTER_MAX", -1)
        product = router.decisions_changed(old, channels)
        monkeypatch.undo()
        assert np.array_equal(one_by_one, product)
        assert (old != router.dist).sum() * 4 < one_by_one.size, "few distances changed"


def test_a_refresh_that_fails_leaves_the_next_one_to_do_the_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    router = _sim(fat_tree(k=8)).router

    def failing(up: np.ndarray, targets: np.ndarray) -> np.ndarray:
        raise MemoryError("no room for the search")

    switch_links = np.unique(router._inter_ch // 2)
    router.link_up[switch_links[::2]] = False  # half the switch links: a wide change
    monkeypatch.setattr(router, "_search", failing)
    with pytest.raises(MemoryError):
        router.refresh()
    monkeypatch.undo()
    router.refresh()
    assert np.array_equal(router.dist, _from_scratch(router))


def test_a_change_too_wide_to_check_searches_every_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fabricops.simulator import routing

    router = _sim(fat_tree(k=8)).router
    searched = _count_searches(router, monkeypatch)
    monkeypatch.setattr(routing, "_REPAIR_MAX", 0)
    router.link_up[router._inter_ch[0] // 2] = False  # one link between two switches
    router.refresh()
    assert searched == [len(router.targets)]
    assert np.array_equal(router.dist, _from_scratch(router))
    router.refresh(from_scratch=True)
    assert searched[-1] == len(router.targets), "from scratch, whatever changed"
