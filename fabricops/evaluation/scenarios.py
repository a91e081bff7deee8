"""Labelled scenarios for training and evaluating the RCA on the simulated fabric.

A scenario is a fabric shape (family, size, oversubscription), a job that keeps
the fabric busy (a soak: three jobs, of which two start and one stops during
the run, so the workload changes under the RCA), in some scenarios a second
job, steady background traffic and a fabric faster than its NICs (``_vary``),
and zero or more faults with
random intensities that start after a healthy warm-up. ``ScenarioSpec`` says
what to draw: the families, sizes and oversubscriptions (by default the shapes
of one split), how many overlapping faults, whether they happen while a link
flaps, and how long a fault-free soak lasts. Training and held-out shapes are
disjoint (``SPLITS``), and so are the seed streams: scenario ``i`` of seed
``s`` is seeded ``s * 1_000_003 + i`` (``TRAIN_SEED`` / ``EVAL_SEED``).
Concurrent faults are put on entities that share no node, so each has a root of
its own. Labels come from the simulator's ground truth and are used for
training and scoring only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.faults import TARGETS, FaultType
from fabricops.core.topology import Topology
from fabricops.simulator.builders import build

TRAIN_SEED: Final = 1
EVAL_SEED: Final = 2
FAMILIES: Final = ("leaf_spine", "fat_tree", "rail_optimized")
Split = Literal["train", "held_out", "all"]
# (family, size, oversubscription); size is GPUs, except k for a fat-tree
SPLITS: Final[dict[str, tuple[tuple[str, int, float], ...]]] = {
    "train": (("leaf_spine", 64, 1.0), ("leaf_spine", 128, 1.0), ("leaf_spine", 128, 3.0),
              ("fat_tree", 4, 1.0), ("fat_tree", 6, 2.0), ("rail_optimized", 128, 1.0),
              ("rail_optimized", 256, 2.0)),
    "held_out": (("leaf_spine", 256, 1.0), ("leaf_spine", 512, 1.0), ("leaf_spine", 256, 2.0),
                 ("fat_tree", 8, 1.0), ("fat_tree", 8, 3.0), ("fat_tree", 6, 1.0),
                 ("rail_optimized", 512, 1.0), ("rail_optimized", 256, 3.0)),
}
# the four shapes of the first model, kept for the hand-written hard cases
TOPOLOGIES: Final[tuple[tuple[str, dict[str, Any]], ...]] = (
    ("leaf_spine", {"gpus": 128, "leaf_radix": 32, "spine_radix": 32}),
    ("leaf_spine", {"gpus": 64, "nics_per_host": 4, "leaf_radix": 16, "spine_radix": 16}),
    ("fat_tree", {"k": 4}),
    ("rail_optimized", {"gpus": 128, "rails": 4, "leaf_radix": 16, "spine_radix": 16}),
)
FAULT_TYPES: Final = tuple(FaultType)
WARMUP_S: Final = 20.0
OBSERVE_S: Final = 12.0
STAGGER_S: Final = 3.0


def shape_params(family: str, size: int, oversubscription: float = 1.0) -> dict[str, Any]:
    """Builder parameters of one shape (raises KeyError for an unknown family). A
    leaf-spine past 512 GPUs gets spines with a port for every leaf (a power of two);
    a fat-tree has 2 NICs a host from k=8 where they divide a pod's host ports, else 1."""
    o = {"oversubscription": oversubscription} if oversubscription != 1.0 else {}
    if family == "leaf_spine":
        if size <= 64:
            return {"gpus": size, "nics_per_host": 4, "leaf_radix": 16, "spine_radix": 16, **o}
        spine = max(32, 1 << (math.ceil(size / 16) - 1).bit_length())
        return {"gpus": size, "leaf_radix": 32, "spine_radix": spine, **o}
    if family == "fat_tree":
        two = size > 6 and size % 4 == 0  # (k/2)^2 host ports a pod: even when 4 | k
        return {"k": size, "nics_per_host": 2 if two else 1, **o}
    if family == "rail_optimized":
        return {"gpus": size, "rails": 4 if size <= 128 else 8, "leaf_radix": 16,
                "spine_radix": 16, **o}
    raise KeyError(family)


def shape_label(family: str, size: int, oversubscription: float) -> str:
    unit = f"k={size}" if family == "fat_tree" else f"{size} GPUs"
    return f"{family} {unit} {oversubscription:g}:1"


class ScenarioSpec(BaseModel):
    """What scenarios to draw (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    split: Split = Field(default="held_out", description="Default shapes: train, held_out, all")
    families: tuple[str, ...] = Field(default=FAMILIES, min_length=1)
    sizes: tuple[int, ...] = Field(default=(), description="GPUs (k for a fat-tree); "
                                   "empty: the split's sizes")
    oversubscription: tuple[float, ...] = Field(default=(), description="Empty: the split's")
    faults: int = Field(default=1, ge=0, le=3, description="Overlapping faults per scenario")
    fault_share: float = Field(default=1.0, ge=0, le=1,
                               description="Share of scenarios with faults (rest healthy)")
    during_flap: bool = Field(default=False, description="A link flaps and the other faults "
                              "start during the flap")
    fault_types: tuple[str, ...] = Field(default=(), description="Empty: every type")
    soak_s: float | None = Field(default=None, gt=0, description="Fault-free run of this length")
    variety: bool = Field(default=True, description="Second jobs, background traffic and "
                          "fabrics faster than the NICs in some scenarios (see _vary)")

    def shapes(self) -> list[tuple[str, int, float]]:
        base = [s for name, group in SPLITS.items() if self.split in (name, "all")
                for s in group]
        out = [s for s in base if s[0] in self.families
               and (not self.sizes or s[1] in self.sizes)
               and (not self.oversubscription or s[2] in self.oversubscription)]
        if not out and (self.sizes or self.oversubscription):
            out = [(f, size, o) for f in self.families for size in self.sizes or (0,)
                   for o in self.oversubscription or (1.0,) if size]
        return out

    def types(self) -> tuple[FaultType, ...]:
        return tuple(FaultType(t) for t in self.fault_types) or FAULT_TYPES


@dataclass(frozen=True)
class LabelledScenario:
    """One scenario document (see simulator.scenario) and what to score it against."""

    index: int
    seed: int
    topology: tuple[str, dict[str, Any]]
    doc: dict[str, Any]
    faults: tuple[dict[str, Any], ...]
    shape: str = ""

    @property
    def healthy(self) -> bool:
        return not self.faults

    @property
    def onset_s(self) -> float | None:
        return min((f["start_s"] for f in self.faults), default=None)


_TOPO_CACHE: dict[str, Topology] = {}


def topology_for(kind: str, params: dict[str, Any]) -> Topology:
    key = f"{kind}{sorted(params.items())}"
    if key not in _TOPO_CACHE:
        _TOPO_CACHE[key] = build(kind, **params)
    return _TOPO_CACHE[key]


def topology_of(choice: int) -> Topology:
    kind, params = TOPOLOGIES[choice]
    return topology_for(kind, params)


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


def nodes_of(entity: str) -> set[str]:
    """The nodes an entity is on: a node itself, a port's node, a link's two nodes."""
    return {part.split(":", 1)[0] for part in entity.split("~")}


def _cyclic(topo: Topology, links: list[str]) -> list[str]:
    """Switch links on a four-switch cycle (both ends have another switch neighbour)."""
    nbrs: dict[str, set[str]] = {}
    for lk in links:
        a, b = lk.split("~")
        na, nb = a.split(":")[0], b.split(":")[0]
        nbrs.setdefault(na, set()).add(nb)
        nbrs.setdefault(nb, set()).add(na)
    out = []
    for lk in links:
        a, b = (e.split(":")[0] for e in lk.split("~"))
        if any(a in nbrs[d] and d != b for c in nbrs[b] - {a} for d in nbrs[c] - {a, b}):
            out.append(lk)
    return out


def _pool(t: FaultType, topo: Topology, rng: np.random.Generator) -> list[str]:
    target = TARGETS[t]
    switch_links = [lk.id for lk in topo.links
                    if not (topo.node_by_id[lk.a.split(":")[0]].is_host
                            or topo.node_by_id[lk.b.split(":")[0]].is_host)]
    if target == "link":
        pool = _cyclic(topo, switch_links) if t is FaultType.PFC_DEADLOCK else [
            lk.id for lk in topo.links]
        if t is FaultType.LINK_DOWN and rng.random() < 0.5:
            pool = switch_links
        return pool
    if target == "switch":
        if t is FaultType.HASH_POLARIZATION:  # polarizes where there is a choice: lower tiers
            return [n.id for n in topo.switches() if n.role.value in ("leaf", "agg")]
        return [n.id for n in topo.switches()]
    return list(topo.nics())


def _entity(t: FaultType, topo: Topology, rng: np.random.Generator,
            taken: set[str]) -> tuple[FaultType, str]:
    """A random target of type ``t`` on no node of ``taken`` (when one exists); a fabric
    with no four-switch cycle gets gray loss instead of a deadlock."""
    pool = _pool(t, topo, rng)
    if not pool:
        t, pool = FaultType.GRAY_LOSS, _pool(FaultType.GRAY_LOSS, topo, rng)
    free = [e for e in pool if not (nodes_of(e) & taken)]
    pick = free or pool
    return t, str(pick[int(rng.integers(len(pick)))])


def _kinds(spec: ScenarioSpec, n: int, rng: np.random.Generator) -> list[FaultType]:
    types = list(spec.types())
    if spec.during_flap:
        rest = [t for t in types if t is not FaultType.LINK_FLAP] or types
        return [FaultType.LINK_FLAP] + [rest[int(i)] for i in rng.choice(
            len(rest), size=n - 1, replace=len(rest) < n - 1)]
    picked = [types[int(i)] for i in rng.choice(len(types), size=n, replace=len(types) < n)]
    # only a first fault is an incast (its senders need the spare hosts)
    return [FaultType.GRAY_LOSS if t is FaultType.INCAST and k else t
            for k, t in enumerate(picked)]


def make(index: int, seed: int, spec: ScenarioSpec | None = None, *,
         duration_s: float | None = None) -> LabelledScenario:
    """Scenario ``index`` of the stream seeded by ``seed`` (deterministic)."""
    spec = spec or ScenarioSpec()
    s = seed * 1_000_003 + index
    rng = np.random.default_rng(s)
    shapes = spec.shapes()
    if not shapes:
        raise ValueError("no fabric shape matches the chosen families, sizes and "
                         "oversubscriptions")
    family, size, over = shapes[int(rng.integers(len(shapes)))]
    params = shape_params(family, size, over)
    topo = topology_for(family, params)
    hosts = sum(1 for _ in topo.hosts())
    soak = spec.soak_s is not None
    n_faults = 0 if soak or rng.random() >= spec.fault_share else max(
        spec.faults, 2 if spec.during_flap else 0)
    start = WARMUP_S + float(rng.uniform(0.0, 5.0))
    faults: list[dict[str, Any]] = []
    taken: set[str] = set()
    for k, t in enumerate(_kinds(spec, n_faults, rng) if n_faults else []):
        t, entity = _entity(t, topo, rng, taken)
        taken |= nodes_of(entity)
        faults.append({"type": t.value, "entity": entity,
                       "start_s": round(start + STAGGER_S * k, 3), "params": _params(t, rng)})
    spare = 4 if any(f["type"] == "incast" for f in faults) else 0
    jobs = [_job(rng, "job-train-a", hosts - spare)]
    if spec.soak_s is not None:
        jobs = _changing_jobs(hosts, spec.soak_s, rng)
    horizon = spec.soak_s or duration_s or (
        start + OBSERVE_S + STAGGER_S * max(n_faults - 1, 0))
    doc = {"name": f"rca-{seed}-{index}", "seed": s, "duration_s": round(horizon),
           "tick_s": 1.0, "topology": {"builder": family, "params": params},
           "jobs": jobs, "faults": faults}
    if spec.variety:
        _vary(doc, hosts, spare, rng, soak)
    return LabelledScenario(index, s, (family, params), doc, tuple(faults),
                            shape_label(family, size, over))


def _job(rng: np.random.Generator, name: str, hosts: int, placement: str | None = None,
         **extra: Any) -> dict[str, Any]:
    """A job document with drawn pacing (and placement, unless given): packed a fifth of
    the time, 0.2-1.5 s of compute a step, 10-80 GB sent a NIC a step."""
    return {"name": name, "hosts": hosts,
            "placement": placement or ("packed" if rng.random() < 0.2 else "random"),
            "compute_s": float(rng.uniform(0.2, 1.5)),
            "comm_bytes_per_nic": float(rng.uniform(10e9, 80e9)), **extra}


def _vary(doc: dict[str, Any], hosts: int, spare: int, rng: np.random.Generator,
          soak: bool) -> None:
    """What real fabrics add, drawn after everything else (so shapes and faults stay
    those of the same index without it): half the time a second job with a pipeline
    collective on a quarter of the hosts (a soak has its own jobs); half the time
    (a soak always) steady background flows at 1-10 % of line rate; a third of the
    time a fabric twice as fast as the NICs."""
    if rng.random() < 0.5 and hosts - spare >= 8 and len(doc["jobs"]) == 1:
        second = (hosts - spare) // 4
        doc["jobs"][0]["hosts"] -= second
        doc["jobs"].append(_job(rng, "job-pipe-b", second, "random", collective="pipeline"))
    if rng.random() < 0.5 or soak:
        doc["background"] = {"flows": max(4, hosts // 2), "share": float(rng.uniform(0.01, 0.1))}
    if rng.random() < 1 / 3:
        key = "link_speed_bps" if doc["topology"]["builder"] == "fat_tree" else "fabric_speed_bps"
        doc["topology"]["params"] = {**doc["topology"]["params"], key: 800_000_000_000}


def _changing_jobs(hosts: int, soak_s: float, rng: np.random.Generator
                   ) -> list[dict[str, Any]]:
    """A soak's workload: a job on half the hosts throughout; a pipeline job on a
    quarter from 1/4 to 1/2 of the run; a ring job on the last quarter from 1/2 on."""
    def job(name: str, n: int, collective: str, start: float, stop: float | None
            ) -> dict[str, Any]:
        return _job(rng, name, max(2, n), collective=collective, start_s=round(start, 3),
                    stop_s=None if stop is None else round(stop, 3))
    quarter = hosts // 4
    return [job("job-train-a", hosts - 2 * quarter, "ring_allreduce", 0.0, None),
            job("job-pipe-b", quarter, "pipeline", soak_s / 4, soak_s / 2),
            job("job-train-c", quarter, "ring_allreduce", soak_s / 2, None)]


def generate(n: int, seed: int, spec: ScenarioSpec | None = None) -> list[LabelledScenario]:
    return [make(i, seed, spec) for i in range(n)]
