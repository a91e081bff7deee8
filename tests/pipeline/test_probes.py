"""INT probe planning on hand-made Clos fabrics, paths from a fake ECMP tracer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from fabricops.core.entities import split_port
from fabricops.core.probes import LinkPath, PathTracer, ProbeFlow
from fabricops.core.topology import Link, Node, NodeRole, Port, Topology
from fabricops.pipeline.probe_candidates import candidate_flows
from fabricops.pipeline.probe_cover import drop_redundant, greedy_cover, incidence
from fabricops.pipeline.probes import (
    ProbePlanner,
    ProbePlannerConfig,
    UncoveredReason,
    one_probe_per_link_count,
    random_probes_for_coverage,
)

SPEED = 400_000_000_000


def clos(*, rails: int = 1, leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 2,
         lone_host: bool = False) -> Topology:
    """One 2-tier plane per rail: ``leaf-{r}-{i}`` meshed to ``spine-{r}-{j}``; host h's
    NIC r on ``leaf-{r}-{h // hosts_per_leaf}``. ``lone_host`` adds a host whose switch
    reaches nothing."""
    nodes: dict[str, tuple[NodeRole, list[str]]] = {}
    links: list[Link] = []

    def port(node: str, role: NodeRole, ifname: str) -> str:
        nodes.setdefault(node, (role, []))[1].append(ifname)
        return f"{node}:{ifname}"

    for h in range(leaves * hosts_per_leaf):
        for r in range(rails):
            nic = port(f"host-{h}", NodeRole.HOST, f"nic{r}")
            leaf = f"leaf-{r}-{h // hosts_per_leaf}"
            links.append(Link(a=nic, b=port(leaf, NodeRole.LEAF, f"eth{h % hosts_per_leaf + 1}")))
    for r in range(rails):
        for i in range(leaves):
            for j in range(spines):
                up = port(f"leaf-{r}-{i}", NodeRole.LEAF, f"eth{hosts_per_leaf + j + 1}")
                links.append(Link(a=up, b=port(f"spine-{r}-{j}", NodeRole.SPINE, f"eth{i + 1}")))
    if lone_host:
        links.append(Link(a=port("host-lone", NodeRole.HOST, "nic0"),
                          b=port("leaf-lone", NodeRole.LEAF, "eth1")))
    return Topology(
        nodes=tuple(Node(id=n, role=role, ports=tuple(Port(name=p, speed_bps=SPEED) for p in ps))
                    for n, (role, ps) in nodes.items()),
        links=tuple(links))


class FakeEcmpTracer:
    """ECMP over a ``clos`` fabric: the uplink is the (sport mod n)-th live spine that
    still reaches the destination leaf. Links in ``down`` carry nothing."""

    def __init__(self, topo: Topology, down: Sequence[str] = ()) -> None:
        self.topo, self.down = topo, set(down)
        self.calls: list[int] = []
        self.up: dict[str, dict[str, str]] = {}
        for link in topo.links:
            (low, _), (high, _) = split_port(link.a), split_port(link.b)
            if high.startswith("spine"):
                self.up.setdefault(low, {})[high] = link.id

    def trace(self, flows: Sequence[ProbeFlow]) -> list[LinkPath | None]:
        self.calls.append(len(flows))
        return [self._path(f) for f in flows]

    def _path(self, flow: ProbeFlow) -> LinkPath | None:
        first, last = (self.topo.link_of_port(n) for n in (flow.src, flow.dst))
        src, dst = (split_port(self.topo.attachment(n))[0] for n in (flow.src, flow.dst))
        if first in self.down or last in self.down:
            return None
        if src == dst:
            return (first, last)
        spines = [s for s, link in self.up.get(src, {}).items()
                  if link not in self.down and self.up[dst].get(s) not in (None, *self.down)]
        if not spines:
            return None
        spine = spines[flow.sport % len(spines)]
        return (first, self.up[src][spine], self.up[dst][spine], last)


def planner(topo: Topology, tracer: PathTracer | None = None, **config: object) -> ProbePlanner:
    cfg = ProbePlannerConfig.model_validate({"sports_per_pair": 4, **config})
    return ProbePlanner(cfg, topo, tracer or FakeEcmpTracer(topo))


def test_plan_covers_every_link_with_the_fewest_probes() -> None:
    topo = clos()
    plan = planner(topo).plan()
    assert plan.coverage == 1.0
    assert set(plan.covered) == {link.id for link in topo.links}
    assert plan.uncovered == ()
    assert len(plan.probes) == 2  # each inter-leaf probe crosses 4 of the 8 links
    assert {name for path in plan.paths for name in path} == set(plan.covered)
    assert all(isinstance(p, ProbeFlow) for p in plan.probes)


def test_plan_is_much_smaller_than_one_probe_per_link_on_a_wider_fabric() -> None:
    topo = clos(leaves=4, spines=4, hosts_per_leaf=4)
    pl = planner(topo, sports_per_pair=8)
    cand = pl.trace(pl.candidates())
    plan = pl.cover(cand)
    assert plan.coverage == 1.0
    assert one_probe_per_link_count(topo) == len(topo.links) == 32
    assert len(plan.probes) <= 10  # optimum is 8: four links per probe
    rng = np.random.default_rng(0)
    assert random_probes_for_coverage(cand, plan.coverage, rng) > len(plan.probes)


def test_same_seed_same_plan_and_another_seed_other_candidates() -> None:
    topo = clos(leaves=3, spines=3, hosts_per_leaf=3)
    assert planner(topo, seed=7).plan() == planner(topo, seed=7).plan()
    assert planner(topo, seed=7).candidates() != planner(topo, seed=8).candidates()


def test_candidates_pair_far_nics_of_one_rail_and_never_a_nic_with_itself() -> None:
    topo = clos(rails=2, leaves=3, hosts_per_leaf=2)
    flows = candidate_flows(topo, np.random.default_rng(1), destinations_per_nic=2,
                            sports_per_pair=3, max_candidates=10_000)
    assert len(flows) == 12 * 2 * 3
    assert {f.src for f in flows} == set(topo.nics())
    for f in flows:
        assert f.src != f.dst
        assert f.src.rpartition(":")[2] == f.dst.rpartition(":")[2]  # same rail
        assert 49152 <= f.sport <= 65535
    first_round = flows[: len(flows) // 3][::2]  # round 0: each source's far destination
    assert all(topo.attachment(f.src).split(":")[0] != topo.attachment(f.dst).split(":")[0]
               for f in first_round)


def test_max_candidates_keeps_every_pair_first() -> None:
    topo = clos()
    flows = candidate_flows(topo, np.random.default_rng(1), destinations_per_nic=1,
                            sports_per_pair=5, max_candidates=6)
    assert len(flows) == 6
    assert [f.src for f in flows[:4]] == list(topo.nics())


def test_uncoverable_links_are_reported_with_a_reason() -> None:
    topo = clos(leaves=3, lone_host=True)
    fabric_link = "leaf-0-1:eth4~spine-0-1:eth2"
    nic_link = topo.link_of_port("host-3:nic0")
    plan = planner(topo, FakeEcmpTracer(topo, down=[fabric_link, nic_link])).plan()
    why = {u.link: u.reason for u in plan.uncovered}
    assert why == {
        fabric_link: UncoveredReason.NOT_ON_ANY_PATH,
        nic_link: UncoveredReason.NIC_UNROUTABLE,
        topo.link_of_port("host-lone:nic0"): UncoveredReason.NO_CANDIDATE,
    }
    detail = {u.reason: u.detail for u in plan.uncovered}
    assert "from or to NIC host-3:nic0 are unroutable" in detail[UncoveredReason.NIC_UNROUTABLE]
    assert "starts or ends at NIC host-lone:nic0" in detail[UncoveredReason.NO_CANDIDATE]
    assert len(plan.covered) == len(topo.links) - 3
    assert plan.coverage == pytest.approx((len(topo.links) - 3) / len(topo.links))
    assert plan.candidates_unroutable > 0


def test_switch_links_only() -> None:
    topo = clos(leaves=3, spines=2)
    pl = planner(topo, include_host_links=False)
    plan = pl.plan()
    assert plan.coverage == 1.0
    assert len(plan.covered) == one_probe_per_link_count(topo, include_host_links=False) == 6
    assert all("host" not in link for link in plan.covered)


def test_tracing_runs_in_batches_and_checks_the_answer() -> None:
    topo = clos()
    tracer = FakeEcmpTracer(topo)
    pl = planner(topo, tracer, trace_batch_size=5)
    flows = pl.candidates()
    pl.trace(flows)
    assert tracer.calls == [5] * (len(flows) // 5) + ([len(flows) % 5] if len(flows) % 5 else [])

    class Short(FakeEcmpTracer):
        def trace(self, flows: Sequence[ProbeFlow]) -> list[LinkPath | None]:
            return super().trace(flows)[1:]

    with pytest.raises(ValueError, match="Short answered 3 paths for 4 flows"):
        planner(topo, Short(topo), trace_batch_size=4).plan()


def test_link_names_the_topology_lacks_are_counted_and_set_aside() -> None:
    topo = clos()

    class Stale(FakeEcmpTracer):
        def trace(self, flows: Sequence[ProbeFlow]) -> list[LinkPath | None]:
            return [p and (*p, "old-0:eth1~old-1:eth1") for p in super().trace(flows)]

    pl = planner(topo, Stale(topo))
    cand = pl.trace(pl.candidates())
    assert cand.unknown_links == len(cand.flows)
    assert pl.cover(cand).coverage == 1.0


def test_greedy_takes_the_largest_new_coverage_then_drops_redundant_picks() -> None:
    m = incidence([[0, 1], [2, 3], [0, 1, 2], [3, 4], [4], [0, 0]], 6)
    target = np.array([1, 1, 1, 1, 1, 0], bool)
    picks = greedy_cover(m, target)
    assert picks == [2, 3]
    assert drop_redundant(m, target, [2, 0, 3]) == [2, 3]
    assert drop_redundant(m, target, [0, 1, 2, 3]) == [0, 1, 3]
    assert greedy_cover(incidence([[], []], 3), np.ones(3, bool)) == []
    assert m[5].sum() == 1  # a link listed twice counts once
