"""ECMP/WCMP forwarding over equal-cost shortest paths.

Every switch picks the next hop of a flow among the neighbours one hop closer
to the destination's switch, by hashing the flow's key with the switch's seed
and indexing the cumulative WCMP weights of the eligible channels. Equal seeds
on consecutive tiers with equal group sizes reproduce hash polarization; a
switch whose hash ignores the UDP source port (``l3_only``) concentrates every
queue pair of a NIC pair on one path. Works on any topology: paths come from
hop distances on the switch graph, not from tier names.

After a change (links up or down, WCMP weights) only the flows that entered a
switch whose decision may differ are routed again (``stale``): the route of a
flow is the chain of decisions at the switches it enters, and a decision at a
switch depends only on its own and its neighbours' distances to the target, on
its channels' state and weight, and on its seed and hash fields.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import shortest_path

from fabricops.simulator.fabric import Fabric

U64 = npt.NDArray[np.uint64]
I32 = npt.NDArray[np.int32]
B = npt.NDArray[np.bool_]
UNREACHABLE = np.int16(30000)
_SCATTER_MAX = 1 << 22  # changed distances x switch radix marked one by one, at most
_REPAIR_MAX = 1 << 23  # targets x switches checked x switch radix, else a search
_M1, _M2, _GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(
    0x9E3779B97F4A7C15
)


def mix64(x: U64) -> U64:
    """The splitmix64 finalizer, element-wise (wrapping uint64 arithmetic)."""
    z = x + _GOLD
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def flow_keys(src_ip: U64, dst_ip: U64, sport: U64, *, with_l4: bool) -> U64:
    """Hash key of RoCEv2 flows (UDP, destination port 4791); ``with_l4`` adds the source port."""
    key = mix64(src_ip * np.uint64(0x100000001B3) ^ dst_ip)
    if with_l4:
        key = mix64(key ^ (sport << np.uint64(17)) ^ np.uint64(4791))
    return key


class Router:
    """Computes flow paths (as channel indices) for the current routing state.

    ``link_up`` is the control plane's view of each link (it lags the physical
    state by the convergence delay); ``weight`` is the WCMP weight of each
    channel (0 removes it from every group); ``seed`` and ``l3_only`` are per
    switch. Call ``refresh`` after changing ``link_up``.
    """

    def __init__(self, fabric: Fabric, seeds: U64) -> None:
        self.fabric = fabric
        self.seed = seeds.astype(np.uint64)
        self.l3_only = np.zeros(len(fabric.switch_nodes), dtype=bool)
        self.link_up = np.ones(fabric.n_links, dtype=bool)
        self.weight = np.ones(fabric.n_channels + 1, dtype=np.int64)
        self._build_adjacency()
        self._nic_switch = fabric.node_switch[
            fabric.port_node[fabric.ch_rx_port[fabric.port_tx_ch[fabric.nic_ports]]]
        ]
        self.targets = np.unique(self._nic_switch)
        self._target_row = np.full(len(fabric.switch_nodes), -1, dtype=np.int32)
        self._target_row[self.targets] = np.arange(len(self.targets), dtype=np.int32)
        self.dist = np.zeros((0, 0), dtype=np.int16)
        self._up_seen: B | None = None  # the links up at the last refresh
        self.refresh()

    def _build_adjacency(self) -> None:
        fab = self.fabric
        tx_sw = fab.node_switch[fab.ch_tx_node()]
        rx_sw = fab.node_switch[fab.ch_rx_node()]
        inter = np.flatnonzero((tx_sw >= 0) & (rx_sw >= 0))
        order = inter[np.lexsort((fab.ch_tx_port[inter], tx_sw[inter]))]
        n_sw = len(fab.switch_nodes)
        deg = np.bincount(tx_sw[order], minlength=n_sw)
        width = max(int(deg.max(initial=0)), 1)
        starts = np.concatenate(([0], np.cumsum(deg)[:-1]))
        slot = np.arange(len(order)) - np.repeat(starts, deg)
        self.out_ch = np.full((n_sw, width), fab.dummy_channel, dtype=np.int32)
        self.out_nbr = np.full((n_sw, width), -1, dtype=np.int32)
        self.out_ch[tx_sw[order], slot] = order
        self.out_nbr[tx_sw[order], slot] = rx_sw[order]
        self._inter_ch = order
        self._inter_tx, self._inter_rx = tx_sw[order], rx_sw[order]
        # switches as neighbours (whatever the links' state), for what a change reaches
        self._adj = coo_matrix((np.ones(len(order), np.int32), (self._inter_tx, self._inter_rx)),
                               shape=(n_sw, n_sw)).tocsr()
        # the switch a channel enters (-1: a NIC, or the dummy channel)
        self._ch_rx_sw = np.append(rx_sw, -1).astype(np.int32)
        self._ch_tx_sw = tx_sw

    def refresh(self, *, from_scratch: bool = False) -> None:
        """Hop distances to every NIC-facing switch over links that are up, in a new
        ``dist`` (the old one is left as it was, for ``stale``).

        After a change only the targets whose distances it can change are searched
        again (unless ``from_scratch``): the old distances still hold for a target when
        every link that came up joins switches at most one hop apart, and every switch
        that lost a link still has a neighbour one hop closer (a switch left with no
        link is unreachable). A change too wide for that check searches every target.
        """
        up = self.link_up[self._inter_ch // 2]
        seen = self._up_seen
        if from_scratch or seen is None:
            self.dist = self._search(up, self.targets)
        elif not np.array_equal(seen, up):
            self.dist = self._repaired(seen, up)
        self._up_seen = up  # only once ``dist`` is for it

    def _search(self, up: B, targets: npt.NDArray[np.integer[Any]]
                ) -> npt.NDArray[np.int16]:
        """Breadth-first hop distances from ``targets`` over the channels ``up``."""
        n_sw = len(self.fabric.switch_nodes)
        graph = coo_matrix(
            (np.ones(int(up.sum())), (self._inter_tx[up], self._inter_rx[up])), shape=(n_sw, n_sw)
        ).tocsr()
        d = shortest_path(graph, method="D", unweighted=True, directed=True, indices=targets)
        # distances *to* a target: the switch graph is symmetric, links are up or down as a whole
        return np.where(np.isfinite(d), d, UNREACHABLE).astype(np.int16)

    def _repaired(self, seen: B, up: B) -> npt.NDArray[np.int16]:
        """The old distances with newly isolated switches made unreachable, switches back
        from isolation placed, and the target rows the checks reject searched again."""
        n_sw = len(self.fabric.switch_nodes)
        alone = np.flatnonzero(np.bincount(self._inter_tx[up], minlength=n_sw) == 0)
        gained = up & ~seen
        was_alone = np.bincount(self._inter_tx[seen], minlength=n_sw) == 0
        back = np.unique(self._inter_tx[gained & was_alone[self._inter_tx]])
        lost = np.unique(self._inter_tx[seen & ~up])
        lost = lost[~np.isin(lost, alone)]
        work = (lost.size + 2 * back.size) * self.out_nbr.shape[1] * len(self.targets)
        if work > _REPAIR_MAX:  # the checks would cost more than a search
            return self._search(up, self.targets)
        dist = self.dist.copy()
        dist[:, alone] = UNREACHABLE
        rows = self._target_row[alone]
        dist[rows[rows >= 0]] = UNREACHABLE
        dist[rows[rows >= 0], alone[rows >= 0]] = 0
        redo = np.zeros(len(self.targets), bool)
        if gained.any():  # a link that came up may be a shortcut
            self._rejoin(dist, back)
            ends = dist[:, self._inter_tx[gained]].astype(np.int32)
            redo |= (np.abs(ends - dist[:, self._inter_rx[gained]]) > 1).any(axis=1)
        if lost.size:  # a switch that lost a link must keep a neighbour one hop closer
            nbr, live = self._neighbours(lost)
            here = dist[:, lost].astype(np.int32)
            closer = (dist[:, nbr] == (here - 1)[:, :, None]) & live
            kept = closer.any(axis=2) | (here == 0) | (here >= UNREACHABLE)
            redo |= ~kept.all(axis=1)
        if redo.any():
            dist[redo] = self._search(up, self.targets[redo])
        return dist

    def _rejoin(self, dist: npt.NDArray[np.int16], back: npt.NDArray[np.int32]) -> None:
        """Distances of switches ``back`` from isolation: one more than their nearest
        neighbour's (twice, for neighbours back together); ``_repaired`` checks
        every link of theirs, as all of them came up."""
        rows = self._target_row[back]
        nbr, live = self._neighbours(back)
        for _ in range(2 if back.size else 0):
            near = np.where(live, dist[:, nbr], UNREACHABLE).min(axis=2)
            dist[:, back] = np.minimum(near.astype(np.int32) + 1, UNREACHABLE)
            dist[rows[rows >= 0], back[rows >= 0]] = 0

    def _neighbours(self, switches: npt.NDArray[np.integer[Any]]) -> tuple[I32, B]:
        """Each switch's neighbour per slot (0 in padding) and whether the link is up."""
        nbr = self.out_nbr[switches]
        live = (nbr >= 0) & np.append(self.link_up, False)[self.out_ch[switches] // 2]
        return np.maximum(nbr, 0), live

    def decisions_changed(self, old_dist: npt.NDArray[np.int16], channels: I32
                          ) -> B:
        """Per (target row, switch): whether its forwarding decision may differ from when
        the distances were ``old_dist``, given that ``channels`` changed state or weight."""
        moved: B = old_dist != self.dist
        out: B = moved.copy()
        row, col = np.nonzero(moved)  # a neighbour's distance decides eligibility too
        width = self.out_nbr.shape[1]
        if row.size * width <= _SCATTER_MAX:  # few changed: mark their neighbours
            nbr = self.out_nbr[col]
            known = nbr >= 0
            out[np.repeat(row, width)[known.ravel()], nbr[known]] = True
        else:  # many: one product with the adjacency, per target some distance changed
            rows = np.unique(row)
            out[rows] |= np.asarray(self._adj @ moved[rows].T.astype(np.int32)).T > 0
        sw = self._ch_tx_sw[channels[channels < len(self._ch_tx_sw)]]
        out[:, sw[sw >= 0]] = True
        return out

    def stale(self, old_dist: npt.NDArray[np.int16], channels: I32, paths: I32,
              dst_nic: I32, routable: B) -> B:
        """Which of these flows (``paths``, one row each) may route differently now than
        under ``old_dist`` before ``channels`` changed: those that entered a switch whose
        decision changed, that use one of the channels, or that had no route."""
        changed = self.decisions_changed(old_dist, channels)
        row = self._target_row[self._nic_switch[dst_nic]]
        sw = self._ch_rx_sw[np.minimum(paths, len(self._ch_rx_sw) - 1)]
        flat = row.astype(np.intp)[:, None] * changed.shape[1] + np.maximum(sw, 0)
        entered = changed.ravel().take(flat) & (sw >= 0)
        out: B = entered.any(axis=1) | np.isin(paths, channels).any(axis=1) | ~routable
        return out

    def max_hops(self) -> int:
        finite = self.dist[self.dist < UNREACHABLE]
        return int(finite.max(initial=0)) + 2

    def route(self, src_nic: I32, dst_nic: I32, key_l4: U64, key_l3: U64) -> tuple[I32, B]:
        """Paths of the given flows, padded with the dummy channel, and whether each is routable.

        A flow whose NIC links are down in the routing view, or whose switches
        have no eligible next hop, is unroutable: its path is all dummy beyond
        the point where forwarding failed.
        """
        fab = self.fabric
        n = len(src_nic)
        hops = self.max_hops()
        paths = np.full((n, hops), fab.dummy_channel, dtype=np.int32)
        first = fab.port_tx_ch[fab.nic_ports[src_nic]]
        last = fab.port_rx_ch[fab.nic_ports[dst_nic]]
        ok = self.link_up[first // 2] & self.link_up[last // 2]
        paths[:, 0] = first
        cur = self._nic_switch[src_nic].copy()
        row = self._target_row[self._nic_switch[dst_nic]]
        col = np.ones(n, dtype=np.int64)
        for _ in range(hops - 2):
            moving = np.flatnonzero(ok & (cur != self._nic_switch[dst_nic]))
            if moving.size == 0:
                break
            ch, nxt = self._next_hop(cur[moving], row[moving], key_l4[moving], key_l3[moving])
            good = ch >= 0
            ok[moving[~good]] = False
            mv = moving[good]
            paths[mv, col[mv]] = ch[good]
            col[mv] += 1
            cur[mv] = nxt[good]
        arrived = ok & (cur == self._nic_switch[dst_nic])
        paths[arrived, col[arrived]] = last[arrived]
        return paths, arrived

    def _next_hop(self, cur: I32, row: I32, key_l4: U64, key_l3: U64) -> tuple[I32, I32]:
        cand = self.out_ch[cur]
        nbr = self.out_nbr[cur]
        here = self.dist[row, cur]
        # a flat take: twice as fast as indexing rows and columns at once
        there = self.dist.ravel().take(row.astype(np.intp)[:, None] * self.dist.shape[1]
                                       + np.maximum(nbr, 0))
        up = np.append(self.link_up, False)
        eligible = (nbr >= 0) & (there == (here - 1)[:, None]) & up[cand // 2]
        w = np.where(eligible, self.weight[cand], 0)
        cum = np.cumsum(w, axis=1)
        total = cum[:, -1]
        key = np.where(self.l3_only[cur], key_l3, key_l4)
        pick = mix64(key ^ self.seed[cur]) % np.maximum(total, 1).astype(np.uint64)
        slot = np.argmax(cum > pick.astype(np.int64)[:, None], axis=1)
        idx = np.arange(len(cur))
        ch = np.where(total > 0, cand[idx, slot], -1).astype(np.int32)
        return ch, nbr[idx, slot]
