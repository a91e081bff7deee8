"""Candidate probe flows for INT probe planning, from the topology alone.

Every cabled NIC is the source of ``destinations_per_nic`` NIC pairs. The first
destination is attached to a switch as far as possible from the source's (in
switch hops, same connected switch fabric), so its shortest paths climb every
tier; the others are attached to any other switch of the same fabric, for
links that only lie on shorter paths. A NIC whose switch fabric has one switch
pairs with another NIC of that switch. NICs whose switches are not connected
(rails of a rail-only fabric) are never paired: no path joins them. Each pair
gets ``sports_per_pair`` random UDP source ports (49152-65535) so ECMP hashing
spreads its flows over the group members. Candidates are ordered by source
port round, then pair, so a ``max_candidates`` cut keeps every pair's first
ports.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import shortest_path

from fabricops.core.entities import split_port
from fabricops.core.probes import ProbeFlow
from fabricops.core.topology import Topology

I64 = NDArray[np.int64]
EPHEMERAL_SPORT = 49152


def candidate_flows(topology: Topology, rng: np.random.Generator, *, destinations_per_nic: int,
                    sports_per_pair: int, max_candidates: int) -> tuple[ProbeFlow, ...]:
    """At most ``max_candidates`` probe flows whose paths together reach every tier."""
    nics, attach = _cabled_nics(topology)
    if len(nics) < 2:
        return ()
    dist, row = _switch_distances(topology, attach)
    dst = np.stack([_destinations(dist, row, rng, farthest=r == 0)
                    for r in range(destinations_per_nic)], axis=1)
    pair_src = np.repeat(np.arange(len(nics)), destinations_per_nic)
    pair_dst = dst.ravel()
    paired = pair_dst >= 0
    pair_src, pair_dst = pair_src[paired], pair_dst[paired]
    sports = rng.integers(EPHEMERAL_SPORT, 0x10000, size=(sports_per_pair, len(pair_src)))
    n = min(max_candidates, sports.size)
    src = np.tile(pair_src, sports_per_pair)[:n].tolist()
    dst_list = np.tile(pair_dst, sports_per_pair)[:n].tolist()
    return tuple(ProbeFlow(nics[s], nics[d], p) for s, d, p in
                 zip(src, dst_list, sports.ravel()[:n].tolist(), strict=True))


def _cabled_nics(topology: Topology) -> tuple[list[str], I64]:
    """NIC ids that are cabled to a switch, and the index of that switch in ``nodes``."""
    index = {n.id: i for i, n in enumerate(topology.nodes)}
    nics, attach = [], []
    for nic in topology.nics():
        peer = topology.peer_of.get(nic)
        if peer is not None:
            nics.append(nic)
            attach.append(index[split_port(peer)[0]])
    return nics, np.array(attach, np.int64)


def _switch_distances(topology: Topology, attach: I64) -> tuple[NDArray[np.float64], I64]:
    """Hop distances between the switches NICs attach to, over switch-to-switch links
    (inf if not connected), and each NIC's row in that matrix."""
    index = {n.id: i for i, n in enumerate(topology.nodes)}
    ends = [(index[split_port(link.a)[0]], index[split_port(link.b)[0]])
            for link in topology.links]
    host = np.array([n.is_host for n in topology.nodes], bool)
    pairs = np.array(ends, np.int64).reshape(-1, 2)
    pairs = pairs[~host[pairs].any(axis=1)]
    n = len(topology.nodes)
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n)).tocsr()
    targets, row = np.unique(attach, return_inverse=True)
    dist = shortest_path(graph, method="D", unweighted=True, directed=False, indices=targets)
    return dist[:, targets], row.astype(np.int64)


def _destinations(dist: NDArray[np.float64], row: I64, rng: np.random.Generator, *,
                  farthest: bool) -> I64:
    """One destination NIC per source NIC (-1 if it has none), chosen at random among
    NICs on the farthest switches, or on any other reachable switch."""
    out = np.full(len(row), -1, np.int64)
    for switch in range(len(dist)):
        sources = np.flatnonzero(row == switch)
        hops = dist[switch, row]
        other = np.isfinite(hops) & (hops > 0)
        if not other.any():
            pool = sources
        elif farthest:
            pool = np.flatnonzero(other & (hops == hops[other].max()))
        else:
            pool = np.flatnonzero(other)
        out[sources] = _draw_others(pool, sources, rng)
    return out


def _draw_others(pool: I64, sources: I64, rng: np.random.Generator) -> I64:
    """A random member of ``pool`` per source, never the source itself (-1 if impossible)."""
    if len(pool) == 0 or (len(pool) == 1 and pool[0] in sources):
        return np.full(len(sources), -1, np.int64)
    pick = pool[rng.integers(0, len(pool), len(sources))]
    clash = pick == sources
    while clash.any():
        pick[clash] = pool[rng.integers(0, len(pool), int(clash.sum()))]
        clash = pick == sources
    return pick
