"""Many switches down at once (a plane losing power), fewer than a collection
outage: each is named, their silence does not lower each other's confidence,
and their links flapping as they boot again are not new faults."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pytest

from fabricops.core.records import Diagnosis
from fabricops.rca.engine import RcaConfig, RcaEngine, nodes_of
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.rca.roots import RootGroup, pick_roots
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec, FaultType
from fabricops.simulator.workload import JobSpec
from tests.rca.twin import busy_fat_tree, scored_rows

# one aggregation switch in each of six pods of a k=8 fat-tree (80 switches): more
# than max_roots, fewer than a collection outage (16)
PLANE = ("agg-0-0", "agg-1-0", "agg-2-0", "agg-3-0", "agg-4-0", "agg-5-0")
# candidates on nodes: 0-5 switches (nodes 0-5), 6 link 0-9, 7 link 1-9
NODES = np.array([[0, 0], [1, 1], [2, 2], [3, 3], [4, 4], [5, 5], [0, 9], [1, 9]])


def test_sure_roots_past_the_cap_are_named_and_unsure_ones_are_not() -> None:
    root = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.0, 0.0])
    sure = {0, 1, 2, 3, 4, 5}
    picked = pick_roots(root, NODES, sure, floor=0.5, echo_floor=0.99, max_roots=2)
    assert [g.root for g in picked] == [0, 1], "no further roots by default"
    picked = pick_roots(root, NODES, sure, floor=0.5, echo_floor=0.99, max_roots=2,
                        sure_roots=8)
    assert [g.root for g in picked] == [0, 1, 2, 3, 4], "5 is below echo_floor: not sure"
    picked = pick_roots(root, NODES, {0, 1, 2, 3}, floor=0.5, echo_floor=0.99, max_roots=2,
                        sure_roots=8)
    assert [g.root for g in picked] == [0, 1, 2, 3], "4 has no symptom of its own"
    picked = pick_roots(root, NODES, sure, floor=0.5, echo_floor=0.99, max_roots=2,
                        sure_roots=1)
    assert [g.root for g in picked] == [0, 1, 2], "at most max_roots + sure_roots"


def test_an_open_roots_echoes_are_absorbed_but_it_is_not_its_own_echo() -> None:
    root = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.995, 0.995])
    switch_0 = RootGroup(0, {0}, kind=1, fault=3)
    picked = pick_roots(root, NODES, {6, 7}, floor=0.5, echo_floor=0.99, max_roots=4,
                        kind=np.array([1] * 6 + [0, 0], np.int8), open_roots=[switch_0])
    assert [g.root for g in picked] == [7], "link 6 is on switch 0: an echo of it"
    root[0] = 1.0
    picked = pick_roots(root, NODES, {0, 6, 7}, floor=0.5, echo_floor=0.99, max_roots=4,
                        kind=np.array([1] * 6 + [0, 0], np.int8), open_roots=[switch_0])
    assert [g.root for g in picked] == [0, 7], "still down: named again"


def _down(sim: Simulator, switches: Collection[str], seconds: int, back_at: float | None,
          config: RcaConfig | None = None) -> list[tuple[Diagnosis, ...]]:
    """Diagnoses of each step of ``sim``; ``switches`` go down at 15 s, until
    ``back_at`` (None: for good)."""
    for name in switches:
        sim.add_fault(FaultSpec(type=FaultType.SWITCH_DOWN, entity=name, start_s=15.0,
                                duration_s=None if back_at is None else back_at - 15.0))
    engine = RcaEngine(sim.fabric.topology, RcaModel.load(DEFAULT_MODEL), config)
    steps = []
    for _ in range(seconds):
        sim.step()
        engine.ingest_frames(sim.frames())
        steps.append(engine.step().diagnoses)
    return steps


def _plane_down(seconds: int, config: RcaConfig | None = None) -> list[tuple[Diagnosis, ...]]:
    """The k=8 plane goes down at 15 s for 8 s."""
    sim = Simulator(fat_tree(k=8), SimConfig(seed=3))
    sim.add_job(JobSpec(hosts=128, placement="random", compute_s=0.3, comm_bytes_per_nic=30e9))
    return _down(sim, PLANE, seconds, 23.0, config)


def test_every_switch_of_a_plane_going_down_is_named_at_full_confidence() -> None:
    """Each named afresh once their silence shows (hold_s 0: no incident republished
    from before it), none lowered for the silence of the others."""
    steps = _plane_down(21, RcaConfig(hold_s=0))
    named = {d.root: d for d in steps[-1] if d.fault_type == "switch_down"}
    assert set(named) == set(PLANE), [(d.root, d.fault_type) for d in steps[-1]]
    for d in named.values():
        assert d.confidence >= 0.9, (d.root, d.confidence)
        assert not {m for m in d.missing if nodes_of(m) & set(PLANE)}, d.missing
    capped = _plane_down(21, RcaConfig(hold_s=0, sure_roots=0))[-1]
    assert len(capped) <= 4, "sure_roots 0: max_roots a step, as before"


def test_the_links_of_switches_back_up_are_not_new_faults() -> None:
    steps = _plane_down(30)
    after = [d for step in steps[23:] for d in step]
    echoes = [(d.root, d.fault_type) for d in after
              if "~" in d.root and nodes_of(d.root) & set(PLANE)]
    assert not echoes, echoes


def test_once_their_silence_shows_only_the_switches_are_scored_not_their_links(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Their peers see every link of theirs down (12,800 links for 100 switches of a
    100k-GPU fabric), but a link at a switch that stopped reporting, or back from
    switch_down, is in that switch's state: the model is asked about the switches."""
    rows = scored_rows(monkeypatch)
    _plane_down(30)
    assert rows[0] > 100, "before their silence shows, their links are scored"
    assert rows[-1] == len(PLANE), rows
    assert len(rows) < 15, "after they are back, their links' flaps are not scored"


def test_a_switch_whose_silent_neighbours_cannot_tell_is_named_by_the_live_ones() -> None:
    """Plane 0 of a k=4 fat-tree goes down: each pod's first aggregation switch and the
    two cores above them. An aggregation switch's links to the cores are seen by
    nobody (both ends silent), its links to the leaves are seen down by both: it is
    down. The cores' neighbours are all silent: nothing tells them down from merely
    silent, so they are named missing, not down."""
    steps = _k4_plane_down(21)
    named = {d.root for d in steps[-1] if d.fault_type == "switch_down"}
    assert named == K4_PLANE - {"core-0", "core-1"}, [(d.root, d.fault_type) for d in steps[-1]]
    assert all(set(d.missing) == {"core-0", "core-1"} for d in steps[-1])


def test_a_switch_back_up_is_not_held_down_while_it_idles() -> None:
    """Back from switch_down and reporting again, a switch carries traffic only in the
    job's collective phases: idle in between, it is still not named down again (an
    incident is held while its root carries no traffic, not once it reports again)."""
    steps = _k4_plane_down(32, back_at=23.0)
    assert any(d.fault_type == "switch_down" for d in steps[21])
    again = [(i, d.root) for i, step in enumerate(steps) if i >= 26 for d in step
             if d.fault_type == "switch_down"]
    assert not again, again


K4_PLANE = {"agg-0-0", "agg-1-0", "agg-2-0", "agg-3-0", "core-0", "core-1"}


def _k4_plane_down(seconds: int, back_at: float | None = None) -> list[tuple[Diagnosis, ...]]:
    """Plane 0 of the k=4 fat-tree goes down at 15 s."""
    return _down(busy_fat_tree(), K4_PLANE, seconds, back_at)
