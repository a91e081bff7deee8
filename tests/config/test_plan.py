"""Planning: the template follows the topology, cable defaults by tier, overrides by --set."""

from __future__ import annotations

from typing import Any

import pytest

from fabricops.config.plan import PlanError, choose_template, plan_fabric, tier_of_link
from fabricops.core.topology import Topology
from fabricops.simulator.builders import fat_tree, leaf_spine, rail_optimized

G400 = 400_000_000_000


def with_params(topo: Topology, **params: Any) -> Topology:
    return topo.model_copy(update={"params": {**topo.params, **params}})


def test_64_gpu_leaf_spine(gpu64: Topology) -> None:
    plan = plan_fabric(gpu64)
    assert plan.template.name == "roce-lossless-2tier-400g"
    assert plan.template.tiers == ("leaf", "spine")
    assert plan.template.oversubscription == 1.0
    assert [s.device for s in plan.switches] == ["leaf-0", "leaf-1", "spine-0"]
    assert len(plan.hosts) == 8
    assert all(len(h.nics) == 8 for h in plan.hosts)
    leaf, spine = plan.switches[0], plan.switches[2]
    assert (leaf.hash_seed, spine.hash_seed) == (11, 23)
    assert {p.cable_m for p in leaf.ports} == {3.0, 50.0}
    assert {p.cable_m for p in spine.ports} == {50.0}
    assert plan.fabric.ecn_for(G400).min_threshold_bytes == 600_000  # 12 us at 400G
    assert any("NIC model unknown" in r for r in plan.template.reasons)


def test_headroom_grows_with_the_cable(gpu64: Topology) -> None:
    leaf = plan_fabric(gpu64).switches[0]
    by_cable = {p.cable_m: p.headroom_bytes for p in leaf.ports}
    # 47 m more cable at 400G: 2 x 47 m x 5 ns/m x 400 Gb/s / 8 = 23,500 bytes.
    assert by_cable[50.0] - by_cable[3.0] == 23_500


def test_fat_tree_has_three_tiers_with_distinct_seeds() -> None:
    plan = plan_fabric(fat_tree(k=4))
    assert plan.template.tiers == ("leaf", "agg", "core")
    assert plan.template.name == "roce-lossless-3tier-400g"
    seeds = {s.tier: s.hash_seed for s in plan.switches}
    assert len(set(seeds.values())) == 3
    core = next(s for s in plan.switches if s.role == "core")
    assert {p.cable_m for p in core.ports} == {100.0}


def test_rail_optimized_and_oversubscribed_templates() -> None:
    rail = choose_template(rail_optimized(gpus=64, rails=8, leaf_radix=16, spine_radix=16))
    assert rail.name.endswith("-rail")
    over = plan_fabric(leaf_spine(gpus=64, oversubscription=3))
    assert over.template.oversubscription == 3.0
    assert over.template.name.endswith("-os3")
    assert over.fabric.ecn_for(G400).min_threshold_bytes == 300_000  # halved
    assert any("halved" in r for r in over.template.reasons)


def test_link_speeds_give_one_ecn_profile_each() -> None:
    topo = leaf_spine(gpus=64, nic_speed_bps=200_000_000_000)
    plan = plan_fabric(topo)
    assert plan.template.speeds_bps == (200_000_000_000, G400)
    assert plan.fabric.ecn_for(200_000_000_000).min_threshold_bytes == 300_000
    leaf = plan.switches[0]
    assert {p.ecn.speed_bps for p in leaf.ports} == {200_000_000_000, G400}


def test_tier_names() -> None:
    topo = fat_tree(k=4)
    node = topo.node_by_id
    assert tier_of_link(node["host-000"], node["leaf-0-0"]) == "host-leaf"
    assert tier_of_link(node["agg-0-0"], node["leaf-0-0"]) == "leaf-agg"
    assert tier_of_link(node["core-0"], node["agg-0-0"]) == "agg-core"


def test_cable_lengths_from_the_topology(tiny: Topology) -> None:
    everywhere = plan_fabric(with_params(tiny, cable_length_m=7)).switches[0]
    assert {p.cable_m for p in everywhere.ports} == {7.0}
    by_tier = plan_fabric(with_params(tiny, cable_length_m={"leaf-spine": 100}))
    assert {p.cable_m for p in by_tier.switches[0].ports} == {3.0, 100.0}
    link = "leaf-0:eth3~spine-0:eth1"
    one = plan_fabric(with_params(tiny, cable_length_m={link: 30})).switches[0]
    assert {p.name: p.cable_m for p in one.ports}["eth3"] == 30.0
    plan = plan_fabric(with_params(tiny, cable_length_m=7))
    assert any("from the topology" in r for r in plan.template.reasons)


def test_bad_cable_length_is_named(tiny: Topology) -> None:
    with pytest.raises(PlanError, match=r"leaf-0:eth1: topology params.cable_length_m gives "
                                        r"'long'"):
        plan_fabric(with_params(tiny, cable_length_m="long"))


def test_nic_model_selects_and_is_reported(tiny: Topology) -> None:
    plan = plan_fabric(with_params(tiny, nic_model="ConnectX-7"))
    assert plan.hosts[0].nic_model == "ConnectX-7"
    assert "NIC model ConnectX-7: mlx5 DCQCN defaults" in plan.template.reasons


def test_overrides_by_alias_and_path(tiny: Topology) -> None:
    plan = plan_fabric(tiny, {"mtu": 4200, "lossless_priority": 4, "roce_dscp": 24,
                              "pfc.watchdog.detection_ms": 300,
                              "ecmp.tier_seeds.spine": 29, "ecn_probability_pct": 5})
    leaf, spine = plan.switches[0], plan.switches[2]
    assert leaf.mtu_bytes == 4200
    assert plan.hosts[0].mtu_bytes == 4200
    assert leaf.pfc_priorities == (4,)
    assert plan.hosts[0].pfc_priorities == (4,)
    assert leaf.qos.dscp_to_tc[24] == 4
    assert leaf.pfc.watchdog.detection_ms == 300
    assert spine.hash_seed == 29
    assert all(p.ecn.mark_probability_pct == 5 for p in leaf.ports)
    default = plan_fabric(tiny).switches[0]
    assert leaf.ports[0].headroom_bytes == default.ports[0].headroom_bytes - 2 * (9100 - 4200)


def test_overrides_add_a_tier_seed(tiny: Topology) -> None:
    plan = plan_fabric(tiny, {"ecmp.tier_seeds.superspine": 91})
    assert plan.fabric.ecmp.tier_seeds["superspine"] == 91


@pytest.mark.parametrize(("overrides", "words"), [
    ({"mtu": 20000}, "mtu_bytes: Input should be less than or equal to 9214"),
    ({"cnp_priority": 3}, "qos: cnp_priority 3 equals lossless_priority"),
    ({"ecmp.tier_seeds.spine": 11}, "hash seeds must differ per tier: leaf and spine"),
    ({"ecn_min_threshold_bytes": 9_000_000}, "must be below max_threshold_bytes"),
    ({"colour": "blue"}, "--set colour: unknown setting"),
    ({"qos.colour": 1}, "--set qos.colour: unknown setting"),
    ({"ecn_profiles": 3}, "ecn_profiles: Input should be a valid tuple"),
    ({"ecn_profiles.5.mark_probability_pct": 3}, "'5' is not an index below 1"),
    ({"trust": "cos"}, "qos.trust: Input should be 'dscp' or 'pcp'"),
])
def test_bad_overrides_give_one_line(tiny: Topology, overrides: dict[str, Any],
                                     words: str) -> None:
    with pytest.raises(PlanError) as info:
        plan_fabric(tiny, overrides)
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_headroom_that_does_not_fit_names_the_switch(gpu64: Topology) -> None:
    with pytest.raises(PlanError, match=r"leaf-0: PFC headroom 9\.7 MB for 64 ports does not "
                                        r"fit the 8\.4 MB headroom budget"):
        plan_fabric(gpu64, {"switch_buffer_bytes": 16 * 2**20, "ecn_max_threshold_bytes":
                            1_000_000, "headroom.max_headroom_share": 0.5})


def test_topology_without_switches_is_refused() -> None:
    lonely = Topology(name="lonely", nodes=(), links=())
    with pytest.raises(PlanError, match="has no switches or no ports"):
        plan_fabric(lonely)
