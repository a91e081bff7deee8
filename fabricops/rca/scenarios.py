"""Labelled scenarios for training and evaluating the RCA on the simulated fabric.

``generate(n, seed)`` draws scenarios: a topology (several kinds and sizes),
jobs that keep the fabric busy, and one fault of any catalogue type (or none,
or two overlapping) with a random intensity, starting after a healthy warm-up.
The seed of scenario ``i`` is ``seed * 1_000_003 + i``, so training and
evaluation draw from disjoint seed ranges (``TRAIN_SEED`` and ``EVAL_SEED``).
Labels come from the simulator's ground truth and are used for scoring only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from fabricops.core.faults import TARGETS, FaultType
from fabricops.core.topology import Topology
from fabricops.simulator.builders import build

TRAIN_SEED: Final = 1
EVAL_SEED: Final = 2
TOPOLOGIES: Final[tuple[tuple[str, dict[str, Any]], ...]] = (
    ("leaf_spine", {"gpus": 128, "leaf_radix": 32, "spine_radix": 32}),
    ("leaf_spine", {"gpus": 64, "nics_per_host": 4, "leaf_radix": 16, "spine_radix": 16}),
    ("fat_tree", {"k": 4}),
    ("rail_optimized", {"gpus": 128, "rails": 4, "leaf_radix": 16, "spine_radix": 16}),
)
FAULT_TYPES: Final = tuple(FaultType)
WARMUP_S: Final = 20.0
OBSERVE_S: Final = 12.0


@dataclass(frozen=True)
class LabelledScenario:
    """One scenario document (see simulator.scenario) and what to score it against."""

    index: int
    seed: int
    topology: tuple[str, dict[str, Any]]
    doc: dict[str, Any]
    faults: tuple[dict[str, Any], ...]

    @property
    def healthy(self) -> bool:
        return not self.faults

    @property
    def onset_s(self) -> float | None:
        return min((f["start_s"] for f in self.faults), default=None)


_TOPO_CACHE: dict[int, Topology] = {}


def topology_of(choice: int) -> Topology:
    if choice not in _TOPO_CACHE:
        kind, params = TOPOLOGIES[choice]
        _TOPO_CACHE[choice] = build(kind, **params)
    return _TOPO_CACHE[choice]


def _params(t: FaultType, rng: np.random.Generator) -> dict[str, Any]:
    if t is FaultType.GRAY_LOSS:
        return {"loss_rate": float(10 ** rng.uniform(-5, -2)),
                "direction": str(rng.choice(["both", "a_to_b", "b_to_a"]))}
    if t is FaultType.OPTIC_DEGRADATION:
        return {"decay_db_per_s": float(rng.uniform(0.05, 0.5)),
                "direction": str(rng.choice(["a_to_b", "b_to_a"]))}
    if t is FaultType.LINK_FLAP:
        down = float(rng.uniform(1.0, 2.0))
        return {"down_s": down, "period_s": down + float(rng.uniform(1.0, 4.0))}
    if t is FaultType.INCAST:
        return {"fan_in": int(rng.integers(4, 15)), "rate_share": float(rng.uniform(0.5, 1.0))}
    if t is FaultType.SLOW_RECEIVER:
        return {"drain_share": float(rng.uniform(0.05, 0.35))}
    if t is FaultType.ECN_MISCONFIG:
        return {"mode": "aggressive"}
    return {}


def _entity(t: FaultType, topo: Topology, rng: np.random.Generator) -> str:
    target = TARGETS[t]
    switch_links = [lk.id for lk in topo.links
                    if not (topo.node_by_id[lk.a.split(":")[0]].is_host
                            or topo.node_by_id[lk.b.split(":")[0]].is_host)]
    if target == "link":
        pool = switch_links if t is FaultType.PFC_DEADLOCK else [lk.id for lk in topo.links]
        if t is FaultType.LINK_DOWN and rng.random() < 0.5:
            pool = switch_links
    elif target == "switch":
        switches = [n.id for n in topo.switches()]
        if t is FaultType.HASH_POLARIZATION:  # polarizes where there is a choice: lower tiers
            switches = [n.id for n in topo.switches() if n.role.value in ("leaf", "agg")]
        pool = switches
    else:
        pool = list(topo.nics())
    return str(pool[int(rng.integers(len(pool)))])


def _fault(t: FaultType, topo: Topology, rng: np.random.Generator, start: float) -> dict[str, Any]:
    return {"type": t.value, "entity": _entity(t, topo, rng), "start_s": round(start, 3),
            "params": _params(t, rng)}


def make(index: int, seed: int, *, healthy_share: float = 0.08,
         overlap_share: float = 0.08, duration_s: float | None = None) -> LabelledScenario:
    """Scenario ``index`` of the stream seeded by ``seed`` (deterministic)."""
    s = seed * 1_000_003 + index
    rng = np.random.default_rng(s)
    choice = int(rng.integers(len(TOPOLOGIES)))
    topo = topology_of(choice)
    hosts = sum(1 for _ in topo.hosts())
    roll = rng.random()
    n_faults = 0 if roll < healthy_share else (2 if roll < healthy_share + overlap_share else 1)
    start = WARMUP_S + float(rng.uniform(0.0, 5.0))
    kinds = rng.choice(len(FAULT_TYPES), size=2, replace=False)
    faults: list[dict[str, Any]] = []
    for k in range(n_faults):
        t = FAULT_TYPES[int(kinds[k])]
        if t is FaultType.INCAST and k:  # only a first fault is an incast
            t = FaultType.GRAY_LOSS
        faults.append(_fault(t, topo, rng, start + 4.0 * k))
    spare = 4 if any(f["type"] == "incast" for f in faults) else 0
    busy = hosts - spare  # a busy fabric: every host in the job
    jobs = [{"name": "job-train-a", "hosts": busy,
             "placement": "packed" if rng.random() < 0.2 else "random",
             "compute_s": float(rng.uniform(0.2, 1.5)),
             "comm_bytes_per_nic": float(rng.uniform(10e9, 80e9))}]
    horizon = duration_s or (start + OBSERVE_S + 4.0 * max(n_faults - 1, 0))
    doc = {"name": f"rca-{seed}-{index}", "seed": s, "duration_s": round(horizon),
           "tick_s": 1.0, "topology": {"builder": TOPOLOGIES[choice][0],
                                       "params": TOPOLOGIES[choice][1]},
           "jobs": jobs, "faults": faults}
    return LabelledScenario(index, s, TOPOLOGIES[choice], doc, tuple(faults))


def generate(n: int, seed: int, **kw: Any) -> list[LabelledScenario]:
    return [make(i, seed, **kw) for i in range(n)]
