"""Separate roots from echoes; held-out shapes; the RCA never reads the simulator."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

import fabricops
from fabricops.evaluation.evaluate import soak_specs
from fabricops.evaluation.scenarios import (
    FAMILIES,
    SPLITS,
    STAGGER_S,
    ScenarioSpec,
    make,
    nodes_of,
    shape_params,
    topology_for,
)
from fabricops.rca.roots import RootGroup, alternatives, pick_roots
from fabricops.simulator.builders import BuilderError, fat_tree
from fabricops.simulator.scenario import Scenario, build_simulator

# candidates on nodes: 0 link a-b, 1 link b-c, 2 link c-d, 3 switch e, 4 link e-f
NODES = np.array([[0, 1], [1, 2], [2, 3], [4, 4], [4, 5]])


def test_a_neighbour_of_a_root_is_its_alternative_not_a_second_root() -> None:
    root = np.array([0.95, 0.9, 0.2, 0.0, 0.0])
    groups = pick_roots(root, NODES, {0, 1}, floor=0.5, echo_floor=0.97, max_roots=4)
    assert [g.root for g in groups] == [0]
    assert alternatives(root, groups[0], [], NODES, 3) == [0, 1, 2]


def test_separate_faults_each_open_a_group_when_a_symptom_supports_them() -> None:
    root = np.array([0.95, 0.0, 0.0, 0.8, 0.7])
    groups = pick_roots(root, NODES, {0, 3}, floor=0.5, echo_floor=0.97, max_roots=4)
    assert [g.root for g in groups] == [0, 3]  # 4 shares switch e's node: an echo of it
    assert alternatives(root, groups[1], [0], NODES, 3) == [3, 4]


def test_an_unsupported_far_candidate_is_a_root_only_when_very_likely() -> None:
    root = np.array([0.95, 0.0, 0.93, 0.0, 0.0])
    assert [g.root for g in pick_roots(root, NODES, {0}, floor=0.5, echo_floor=0.97,
                                       max_roots=4)] == [0]
    root[0], root[2] = 0.99, 0.98
    assert [g.root for g in pick_roots(root, NODES, {0}, floor=0.5, echo_floor=0.97,
                                       max_roots=4)] == [0, 2]


def test_roots_below_the_floor_or_beyond_the_cap_are_not_named() -> None:
    root = np.array([0.4, 0.0, 0.45, 0.0, 0.3])
    assert pick_roots(root, NODES, {0, 2, 4}, floor=0.5, echo_floor=0.97, max_roots=4) == []
    root = np.array([0.9, 0.0, 0.9, 0.9, 0.0])
    groups = pick_roots(root, NODES, {0, 2, 3}, floor=0.5, echo_floor=0.97, max_roots=2)
    assert len(groups) == 2
    assert alternatives(np.zeros(5), RootGroup(1, {1, 2}), [], NODES, 3) == [1]


def test_held_out_shapes_are_never_trained_on() -> None:
    assert not set(SPLITS["train"]) & set(SPLITS["held_out"])
    trained = {str(shape_params(*s)) for s in SPLITS["train"]}
    for i in range(6):
        ls = make(i, 5, ScenarioSpec(split="held_out"))
        assert str(ls.topology[1]) not in trained


def test_concurrent_faults_have_roots_of_their_own_and_flap_first_when_asked() -> None:
    for i in range(6):
        ls = make(i, 9, ScenarioSpec(split="train", faults=3))
        assert len(ls.faults) == 3
        nodes = [nodes_of(f["entity"]) for f in ls.faults]
        assert all(not (a & b) for k, a in enumerate(nodes) for b in nodes[k + 1:])
    flap = make(0, 9, ScenarioSpec(split="train", faults=2, during_flap=True))
    assert flap.faults[0]["type"] == "link_flap"
    assert flap.faults[1]["start_s"] == pytest.approx(flap.faults[0]["start_s"] + STAGGER_S)
    soak = make(0, 9, ScenarioSpec(soak_s=60.0, faults=2))
    assert soak.healthy
    assert soak.doc["duration_s"] == 60


def test_a_soak_changes_its_workload_while_it_runs() -> None:
    soak = make(0, 9, ScenarioSpec(soak_s=3600.0))
    jobs = soak.doc["jobs"]
    assert {j["collective"] for j in jobs} == {"ring_allreduce", "pipeline"}
    starts = sorted(j["start_s"] for j in jobs)
    assert starts[0] == 0.0
    assert 0.0 < starts[1] < starts[2] < 3600.0, "jobs start mid-run"
    assert any(j["stop_s"] is not None and j["stop_s"] < 3600.0 for j in jobs), "one stops"
    assert soak.doc["background"]["flows"] > 0, "steady traffic besides the jobs"
    sim = build_simulator(Scenario.model_validate(soak.doc))
    assert sum(j["hosts"] for j in jobs) <= len(sim.workload.free_hosts()) + sum(
        len(h) for h in sim.workload.hosts), "every job was placed"


def test_soaks_take_the_families_in_turn() -> None:
    specs = soak_specs(ScenarioSpec(), 3, 60.0)
    assert [s.families for s in specs] == [(f,) for f in FAMILIES]
    assert all(s.soak_s == 60.0 for s in specs)


def test_a_deadlock_is_only_drawn_where_a_four_switch_cycle_exists() -> None:
    spec = ScenarioSpec(split="all", families=("rail_optimized",), sizes=(256,),
                        oversubscription=(3.0,), fault_types=("pfc_deadlock",))
    ls = make(0, 3, spec)  # one spine per rail: no cycle, so gray loss instead
    assert [f["type"] for f in ls.faults] == ["gray_loss"]


def test_shapes_asked_for_outside_the_catalogue_are_built_on_demand() -> None:
    spec = ScenarioSpec(families=("fat_tree",), sizes=(10,), oversubscription=(1.0,))
    assert spec.shapes() == [("fat_tree", 10, 1.0)]
    assert ScenarioSpec(families=("fat_tree",), sizes=(999,)).shapes() == [
        ("fat_tree", 999, 1.0)]
    with pytest.raises(KeyError):
        shape_params("ring", 8)
    with pytest.raises(BuilderError):
        topology_for("fat_tree", shape_params("fat_tree", 5))  # odd k


@pytest.mark.parametrize(("family", "size", "o"), [
    ("leaf_spine", 1024, 1.0), ("leaf_spine", 1024, 3.0), ("leaf_spine", 2048, 1.0),
    ("fat_tree", 10, 1.0), ("fat_tree", 14, 1.0), ("fat_tree", 12, 1.0)])
def test_larger_shapes_than_the_catalogue_build(family: str, size: int, o: float) -> None:
    """Spines get a port for every leaf; a fat-tree whose pods' host ports 2 NICs a
    host do not divide gets 1 (the catalogue's shapes keep their parameters)."""
    topo = topology_for(family, shape_params(family, size, o))
    nics = topo.summary()["nics"]
    assert nics == size if family == "leaf_spine" else nics == size ** 3 // 4


def test_an_oversubscribed_fat_tree_has_fewer_aggs_and_more_hosts_per_leaf() -> None:
    t = fat_tree(k=8, oversubscription=3.0)
    leaf = t.node_by_id["leaf-0-0"]
    ups = [p for p in leaf.ports if t.peer_of[f"leaf-0-0:{p.name}"].startswith("agg-")]
    assert (len(leaf.ports) - len(ups), len(ups)) == (6, 2)
    assert sum(1 for n in t.nodes if n.id.startswith("core-")) == 8
    assert sum(1 for _ in t.hosts()) == 8 * 4 * 6
    assert fat_tree(k=8).params["oversubscription"] == 1.0
    assert len(fat_tree(k=4).links) == 48  # the classic fat-tree is unchanged


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "3", True, None])
def test_a_fat_tree_refuses_an_oversubscription_that_cannot_be(bad: object) -> None:
    with pytest.raises(BuilderError, match="oversubscription"):
        fat_tree(k=8, oversubscription=bad)  # type: ignore[arg-type]


def test_a_fat_tree_refuses_an_oversubscription_that_leaves_no_uplink() -> None:
    with pytest.raises(BuilderError, match="uplinks"):
        fat_tree(k=4, oversubscription=100.0)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


@pytest.mark.parametrize("package", ["rca", "remediation"])
def test_rca_and_remediation_never_import_the_simulator_or_the_harness(package: str) -> None:
    root = Path(fabricops.__file__).parent / package
    files = sorted(root.rglob("*.py"))
    assert files
    wrong = {f"{f.relative_to(root.parent)}: {m}" for f in files for m in _imports(f)
             if m.split(".")[:2] in (["fabricops", "simulator"], ["fabricops", "evaluation"])}
    assert wrong == set()


def test_scenarios_vary_jobs_background_and_speeds_without_moving_their_faults() -> None:
    plain = [make(i, 9, ScenarioSpec(split="train", variety=False)) for i in range(24)]
    varied = [make(i, 9, ScenarioSpec(split="train")) for i in range(24)]
    assert [p.faults for p in plain] == [v.faults for v in varied]
    assert [p.shape for p in plain] == [v.shape for v in varied]
    assert all(len(p.doc["jobs"]) == 1 and "background" not in p.doc for p in plain)
    assert any(len(v.doc["jobs"]) == 2 for v in varied), "a second job"
    assert any(j.get("collective") == "pipeline" for v in varied for j in v.doc["jobs"])
    assert any("background" in v.doc for v in varied), "steady background traffic"
    fast = [v for v in varied if {"fabric_speed_bps", "link_speed_bps"}
            & set(v.doc["topology"]["params"])]
    assert fast, "a fabric faster than its NICs"
    for v in (fast[0], next(v for v in varied if "background" in v.doc)):
        sim = build_simulator(Scenario.model_validate(v.doc))
        sim.run(2)
        assert sim.workload.flows.active.any()
