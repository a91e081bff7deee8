"""INT probe planning: the fewest probe flows whose ECMP paths together cover every link.

``ProbePlanner(config, topology, tracer).plan()`` generates candidate flows
from the topology (``probe_candidates``), asks the fabric's ``PathTracer``
which links each one crosses (in batches of ``trace_batch_size``), and picks a
greedy set cover of the target links (every link, or only switch-to-switch
links). Links that no traced candidate crosses are reported with a reason,
never dropped. The plan holds only flows; paths are valid until forwarding
changes (a link goes down, WCMP weights or hash seeds change): plan again then.

Baselines: ``one_probe_per_link_count`` (a probe pinned to each link) and
``random_probes_for_coverage`` (random candidates until the plan's coverage).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field
from scipy.sparse import csr_matrix

from fabricops.core.probes import LinkPath, PathTracer, ProbeFlow
from fabricops.core.topology import Topology
from fabricops.pipeline.probe_candidates import candidate_flows
from fabricops.pipeline.probe_cover import (
    drop_redundant,
    greedy_cover,
    incidence,
    random_count_for_coverage,
)

B = NDArray[np.bool_]


class ProbePlannerConfig(BaseModel):
    """How many candidate flows to try, and which links must be covered."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sports_per_pair: int = Field(default=16, ge=1, le=16384,
                                 description="UDP source ports tried per NIC pair")
    destinations_per_nic: int = Field(default=2, ge=1,
                                      description="NIC pairs per source NIC; the first far")
    max_candidates: int = Field(default=100_000, ge=1, description="Candidate flows traced")
    trace_batch_size: int = Field(default=8192, ge=1, description="Flows per tracer call")
    seed: int = Field(default=0, ge=0, description="Seeds the choice of pairs and ports")
    include_host_links: bool = Field(default=True,
                                     description="Cover NIC-to-switch links too, not only "
                                                 "switch-to-switch links")


class UncoveredReason(StrEnum):
    """Why no probe can cover a link."""

    NO_CANDIDATE = "no_candidate"
    NIC_UNROUTABLE = "nic_unroutable"
    NOT_ON_ANY_PATH = "not_on_any_path"


class UncoveredLink(NamedTuple):
    """A target link no candidate crosses: its id, why, and a sentence for people."""

    link: str
    reason: UncoveredReason
    detail: str


@dataclass(frozen=True, eq=False)
class CandidatePaths:
    """Traced candidates: ``matrix[c, l]`` is 1 when candidate c crosses link l.

    ``target`` marks the links to cover; ``routable`` the candidates with a path;
    ``unknown_links`` counts link names from the tracer that the topology lacks
    (set aside).
    """

    flows: tuple[ProbeFlow, ...]
    paths: tuple[LinkPath | None, ...]
    matrix: csr_matrix
    link_ids: tuple[str, ...]
    target: B
    unknown_links: int

    @property
    def routable(self) -> B:
        return np.array([p is not None for p in self.paths], bool)


@dataclass(frozen=True)
class ProbePlan:
    """Probe flows to report over INT, the target links they cover, and the rest."""

    probes: tuple[ProbeFlow, ...]
    paths: tuple[LinkPath, ...]
    covered: tuple[str, ...]
    uncovered: tuple[UncoveredLink, ...]
    candidates_traced: int
    candidates_unroutable: int

    @property
    def coverage(self) -> float:
        """Covered fraction of the target links (1.0 when there are none)."""
        total = len(self.covered) + len(self.uncovered)
        return len(self.covered) / total if total else 1.0


class ProbePlanner:
    """Plans probe flows for one topology through a tracer. Inert; ``plan`` does the work."""

    def __init__(self, config: ProbePlannerConfig, topology: Topology,
                 tracer: PathTracer) -> None:
        self.config = config
        self.topology = topology
        self.tracer = tracer
        self._link_index = {link.id: i for i, link in enumerate(topology.links)}

    def plan(self) -> ProbePlan:
        """Candidates, traced, then covered; see the module docstring."""
        return self.cover(self.trace(self.candidates()))

    def candidates(self) -> tuple[ProbeFlow, ...]:
        """Candidate flows, the same for the same topology and seed."""
        cfg = self.config
        return candidate_flows(
            self.topology, np.random.default_rng(cfg.seed),
            destinations_per_nic=cfg.destinations_per_nic,
            sports_per_pair=cfg.sports_per_pair, max_candidates=cfg.max_candidates)

    def trace(self, flows: tuple[ProbeFlow, ...]) -> CandidatePaths:
        """Trace ``flows`` in batches; ValueError if the tracer answers a batch wrongly."""
        size = self.config.trace_batch_size
        paths: list[LinkPath | None] = []
        for start in range(0, len(flows), size):
            batch = flows[start:start + size]
            got = self.tracer.trace(batch)
            if len(got) != len(batch):
                raise ValueError(f"path tracer {type(self.tracer).__name__} answered "
                                 f"{len(got)} paths for {len(batch)} flows")
            paths.extend(got)
        rows, unknown = self._link_rows(paths)
        return CandidatePaths(
            flows=flows, paths=tuple(paths), matrix=incidence(rows, len(self._link_index)),
            link_ids=tuple(self._link_index), target=self._target(), unknown_links=unknown)

    def cover(self, cand: CandidatePaths) -> ProbePlan:
        """The greedy cover of ``cand``'s target links, redundant picks removed."""
        picks = drop_redundant(cand.matrix, cand.target,
                               greedy_cover(cand.matrix, cand.target))
        crossed = np.zeros(len(cand.link_ids), bool)
        if picks:
            crossed = np.asarray(cand.matrix[picks].sum(axis=0)).ravel() > 0
        hit = cand.target & crossed
        missing = np.flatnonzero(cand.target & ~hit).tolist()
        return ProbePlan(
            probes=tuple(cand.flows[i] for i in picks),
            paths=tuple(p for i in picks if (p := cand.paths[i]) is not None),
            covered=tuple(cand.link_ids[i] for i in np.flatnonzero(hit).tolist()),
            uncovered=self._explain(cand, missing),
            candidates_traced=len(cand.flows),
            candidates_unroutable=int((~cand.routable).sum()))

    def _link_rows(self, paths: list[LinkPath | None]) -> tuple[list[list[int]], int]:
        index, rows, unknown = self._link_index, [], 0
        for path in paths:
            row = [index[name] for name in path or () if name in index]
            unknown += len(path or ()) - len(row)
            rows.append(row)
        return rows, unknown

    def _target(self) -> B:
        if self.config.include_host_links:
            return np.ones(len(self.topology.links), bool)
        host = self.topology.port_by_id
        return np.array([not (host[link.a][0].is_host or host[link.b][0].is_host)
                         for link in self.topology.links], bool)

    def _explain(self, cand: CandidatePaths, missing: list[int]) -> tuple[UncoveredLink, ...]:
        """A reason for every target link no routable candidate crosses."""
        if not missing:
            return ()
        flows, routable = Counter[str](), Counter[str]()
        for flow, path in zip(cand.flows, cand.paths, strict=True):
            flows.update((flow.src, flow.dst))
            if path is not None:
                routable.update((flow.src, flow.dst))
        usable = int(cand.routable.sum())
        return tuple(self._why(cand.link_ids[i], flows, routable, usable) for i in missing)

    def _why(self, link_id: str, flows: Counter[str], routable: Counter[str],
             usable: int) -> UncoveredLink:
        link = self.topology.link_by_id[link_id]
        nic = next((p for p in (link.a, link.b) if self.topology.port_by_id[p][0].is_host), None)
        if nic is not None and flows[nic] == 0:
            return UncoveredLink(link_id, UncoveredReason.NO_CANDIDATE,
                                 f"no candidate flow starts or ends at NIC {nic}")
        if nic is not None and routable[nic] == 0:
            return UncoveredLink(link_id, UncoveredReason.NIC_UNROUTABLE,
                                 f"all {flows[nic]} candidate flows from or to NIC {nic} are "
                                 "unroutable (its link down, or no path to the other end)")
        return UncoveredLink(link_id, UncoveredReason.NOT_ON_ANY_PATH,
                             f"none of the {usable} routable candidate flows crosses it (down, "
                             "drained to weight 0, or on no equal-cost path between NICs)")


def one_probe_per_link_count(topology: Topology, *, include_host_links: bool = True) -> int:
    """Probes needed when every link gets a probe of its own: the number of target links."""
    if include_host_links:
        return len(topology.links)
    host = topology.port_by_id
    return sum(1 for link in topology.links
               if not (host[link.a][0].is_host or host[link.b][0].is_host))


def random_probes_for_coverage(candidates: CandidatePaths, target_coverage: float,
                               rng: np.random.Generator, *, trials: int = 5) -> float:
    """Mean over ``trials`` random orders of the routable candidates of how many it takes
    to cover ``target_coverage`` (0..1) of the target links; inf if they never do."""
    usable = np.flatnonzero(candidates.routable).astype(np.int64)
    counts = [random_count_for_coverage(candidates.matrix, candidates.target, usable,
                                        target_coverage, rng) for _ in range(trials)]
    return float(np.mean(counts))
