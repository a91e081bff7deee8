"""Candidate root entities and their feature rows.

Every link, switch and NIC of the topology is a candidate. ``Candidates``
fixes their order (links, then switches, then NICs) and names; ``features``
turns one step's PortSignals (plus INT flow paths) into one row per candidate
with the columns ``FEATURES``. A row mixes what is seen on the entity itself,
on its neighbours (a switch's peers, a NIC's ToR port) and fabric-wide context,
so that a model can tell the root from the victims. Two structural signals are
computed here: PFC pause cycles (a deadlock is a cycle in the waits-for graph
of fully paused channels) and path votes (flows that saw loss vote for every
link on their INT path; the link shared by bad paths collects the votes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from fabricops.rca.signals import PortSignals
from fabricops.rca.view import PortIndex

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]
LINK, SWITCH, NIC = 0, 1, 2
KIND_NAMES: Final = ("link", "switch", "nic")
BAD_RETRANS: Final = 1e-5
BAD_OOO: Final = 1e-7

FEATURES: Final = (
    "is_link", "is_switch", "is_nic",
    # links
    "l_down_any", "l_down_both", "l_flaps", "l_fcs_log", "l_fcs_rel", "l_rx_drop", "l_rx_slope",
    "l_pause_max", "l_pause_min", "l_util", "l_ecn", "l_queue", "l_host", "l_missing",
    "l_cycle", "l_vote_share", "l_vote_rel", "l_discards",
    # switches
    "s_missing", "s_nbr_down", "s_nbr_down_n", "s_imbalance", "s_imbalance_rel", "s_ecn_max",
    "s_ecn_lowq", "s_noecn_q", "s_pause_sent", "s_pause_recv", "s_origin", "s_cycle",
    "s_util", "s_polar", "s_polar_n", "s_polar_p", "s_moved",
    # NICs
    "n_pause_tx", "n_pause_idle", "n_util_rx", "n_util_tx", "n_cnp", "n_retrans_log",
    "n_ooo_log", "n_missing", "n_host_missing", "n_down", "n_tor_ecn", "n_tor_queue",
    "n_tor_pause_sent", "n_fcs_log", "n_flaps", "n_pause_rel", "n_cnp_rel", "n_fan_in",
    "n_rx_sustained",
    # fabric-wide context
    "g_fcs_log", "g_pause", "g_down", "g_imbalance", "g_missing", "g_cycle", "g_vote",
)
FCOL: Final = {name: i for i, name in enumerate(FEATURES)}
OWN: Final = slice(FCOL["l_down_any"], FCOL["g_fcs_log"])  # what is seen on the entity itself


def _log(x: F64) -> F64:
    out: F64 = np.log10(np.maximum(x, 0.0) + 1e-12) + 12.0
    return out


@dataclass(frozen=True)
class PathStats:
    """What INT paths say: recent flows, per-node hash agreement and flow moves
    between uplinks, per-NIC fan-in and the fan-in each NIC usually has."""

    flows: Sequence[tuple[int, int, tuple[int, ...]]]
    agree: F64  # per node
    agree_n: F64  # per node
    uplinks: F64  # per node: uplink count
    fan_in: F64  # per NIC
    moved: F64  # per node: flows moved between stable uplinks
    fan_in_usual: F64 | None = None  # per NIC: its usual fan-in (None: none known)

    def fan_in_excess(self) -> F64:
        """Per NIC: senders beyond its usual ones (its collective, steady background)."""
        if self.fan_in_usual is None:
            return self.fan_in
        out: F64 = np.maximum(self.fan_in - self.fan_in_usual, 0.0)
        return out

    def polar_log_p(self) -> F64:
        """Per node: -log10 of the chance that every pair agreed by luck (0 if any did not)."""
        p0 = 1.0 / np.maximum(self.uplinks, 1.0)
        allsame = (self.agree_n > 0) & (self.agree >= 1.0)
        out: F64 = np.where(allsame & (self.uplinks >= 2),
                            -self.agree_n * np.log10(np.maximum(p0, 1e-9)), 0.0)
        return out


@dataclass(frozen=True)
class Candidates:
    """Candidate order and names: links, then switches, then NICs."""

    names: tuple[str, ...]
    kind: npt.NDArray[np.int8]
    n_links: int
    n_switches: int

    @classmethod
    def of(cls, ix: PortIndex) -> Candidates:
        sw = tuple(ix.node_ids[n] for n in ix.switch_nodes.tolist())
        nics = tuple(ix.port_ids[p] for p in ix.nic_ports.tolist())
        kind = np.concatenate((np.full(ix.n_links, LINK), np.full(len(sw), SWITCH),
                               np.full(len(nics), NIC))).astype(np.int8)
        return cls(ix.link_ids + sw + nics, kind, ix.n_links, len(sw))

    def __len__(self) -> int:
        return len(self.names)

    def nodes(self, ix: PortIndex) -> I64:
        """candidates x 2: the nodes each is on (a link's two ends; a switch twice; a NIC's
        host and its switch)."""
        nic_peer = np.maximum(ix.peer[ix.nic_ports], 0)
        a = np.concatenate((ix.port_node[ix.link_ports[:, 0]], ix.switch_nodes,
                            ix.port_node[ix.nic_ports]))
        b = np.concatenate((ix.port_node[ix.link_ports[:, 1]], ix.switch_nodes,
                            ix.port_node[nic_peer]))
        out: I64 = np.stack((a, b), axis=1).astype(np.int64)
        return out

    def switch_of_node(self, ix: PortIndex) -> I64:
        """Per node: its switch candidate, -1 for a host."""
        out = np.full(ix.n_nodes, -1, np.int64)
        out[ix.switch_nodes] = self.n_links + np.arange(self.n_switches)
        return out

    def nic_of_port(self, ix: PortIndex) -> I64:
        """Per port: its NIC candidate, -1 for a switch port."""
        out = np.full(ix.n_ports, -1, np.int64)
        out[ix.nic_ports] = self.n_links + self.n_switches + np.arange(len(ix.nic_ports))
        return out

    def link_ends(self, ix: PortIndex) -> I64:
        """links x 4: the switch candidate at each end of each link, and the NIC candidate
        of each end port, -1 where there is none."""
        switch, nic = self.switch_of_node(ix), self.nic_of_port(ix)
        lp = ix.link_ports
        return np.stack((switch[ix.port_node[lp[:, 0]]], switch[ix.port_node[lp[:, 1]]],
                         nic[lp[:, 0]], nic[lp[:, 1]]), axis=1)


def pause_cycles(ix: PortIndex, sig: PortSignals, full: float = 0.9) -> B:
    """Per port: its egress channel is on a cycle of fully paused channels. A channel is
    paused by its sender's account (pause frames received); where the sender does not
    report, by its receiver's (pause frames sent), so a cycle through a switch that
    stopped reporting but forwards still closes."""
    has = ix.peer >= 0
    by_sender = has & (sig.pause_rx >= full)
    silent = sig.silent
    blind = np.flatnonzero(has & silent)
    if blind.size:  # usually none
        peer = ix.peer[blind]
        by_sender[blind] = ~silent[peer] & (sig.pause_tx[peer] >= full)
    paused = np.flatnonzero(by_sender)
    out = np.zeros(ix.n_ports, bool)
    if paused.size < 2:
        return out
    a = ix.port_node[paused]
    b = ix.port_node[ix.peer[paused]]
    keep = ~ix.node_is_host[a] & ~ix.node_is_host[b]
    if not keep.any():
        return out
    g = coo_matrix((np.ones(int(keep.sum())), (a[keep], b[keep])),
                   shape=(ix.n_nodes, ix.n_nodes))
    _, label = connected_components(g, directed=True, connection="strong")
    size = np.bincount(label, minlength=int(label.max()) + 1)
    ports = paused[keep]
    same = label[a[keep]] == label[b[keep]]
    out[ports[same & (size[label[a[keep]]] >= 2)]] = True
    return out


def path_votes(ix: PortIndex, sig: PortSignals,
               flows: Sequence[tuple[int, int, tuple[int, ...]]]) -> tuple[F64, F64]:
    """Per link: share of the flows crossing it that saw loss, and its weighted votes."""
    votes, seen, bad_n = np.zeros(ix.n_links), np.zeros(ix.n_links), np.zeros(ix.n_links)
    if not flows:
        return votes, votes
    retrans = sig.retrans_ratio[ix.nic_ports]
    ooo = sig.ooo_ratio[ix.nic_ports]
    for s, d, links in flows:
        bad = retrans[s] > BAD_RETRANS or ooo[d] > BAD_OOO
        idx = list(links)
        seen[idx] += 1.0
        if bad:
            votes[idx] += 1.0 / len(idx)
            bad_n[idx] += 1.0
    return bad_n / np.maximum(seen, 1.0), votes


def features(ix: PortIndex, cand: Candidates, sig: PortSignals, paths: PathStats,
             out: F64 | None = None) -> F64:
    """One row per candidate, columns FEATURES: in ``out`` when it is a matrix of that
    shape in column order (cleared first), else in a new one."""
    flows = paths.flows
    shape = (len(cand), len(FEATURES))
    if out is not None and out.shape == shape and out.flags.f_contiguous:
        x = out
        x.fill(0.0)
    else:
        x = np.zeros(shape, order="F")  # filled a column at a time
    lo, hi = cand.n_links, cand.n_links + cand.n_switches
    x[:lo, FCOL["is_link"]] = 1.0
    x[lo:hi, FCOL["is_switch"]] = 1.0
    x[hi:, FCOL["is_nic"]] = 1.0
    cyc = pause_cycles(ix, sig)
    share, votes = path_votes(ix, sig, flows)
    _links(ix, sig, x[:lo], cyc, share, votes)
    _switches(ix, sig, x[lo:hi], cyc, paths)
    _nics(ix, sig, x[hi:], paths)
    g = x[:, FCOL["g_fcs_log"]:]
    g[:] = [
        float(_log(sig.fcs_ratio).max(initial=0.0)), float(sig.pause_tx.max(initial=0.0)),
        float(np.count_nonzero(sig.oper_down)) / 2.0, float(sig.imbalance.max(initial=0.0)),
        float(np.count_nonzero(sig.silent)), float(cyc.any()),
        float(votes.max(initial=0.0)),
    ]
    return x


def _links(ix: PortIndex, sig: PortSignals, x: F64, cyc: B, share: F64, votes: F64) -> None:
    a, b = ix.link_ports[:, 0], ix.link_ports[:, 1]

    def both(v: npt.NDArray[np.float64] | B) -> tuple[F64, F64]:
        va, vb = np.asarray(v, float)[a], np.asarray(v, float)[b]
        return np.maximum(va, vb), np.minimum(va, vb)

    fcs = both(_log(sig.fcs_ratio))[0]
    down, pause = both(sig.oper_down), both(sig.pause_rx)
    cols = {
        "l_down_any": down[0], "l_down_both": down[1],
        "l_flaps": both(sig.flaps)[0], "l_fcs_log": fcs,
        "l_fcs_rel": fcs / max(float(fcs.max(initial=0.0)), 1e-9),
        "l_rx_drop": both(sig.rx_drop_db)[0], "l_rx_slope": both(sig.rx_slope)[1],
        "l_pause_max": pause[0], "l_pause_min": pause[1],
        "l_util": both(np.maximum(sig.util_tx, sig.util_rx))[0],
        "l_ecn": both(sig.ecn_ratio)[0], "l_queue": both(sig.queue)[0] / 1e6,
        "l_host": (ix.port_is_nic[a] | ix.port_is_nic[b]).astype(float),
        "l_missing": both(sig.silent)[0],
        "l_cycle": both(cyc)[0], "l_vote_share": share,
        "l_vote_rel": votes / max(float(votes.max(initial=0.0)), 1e-9),
        "l_discards": _log(both(sig.discards)[0]),
    }
    for name, v in cols.items():
        x[:, FCOL[name]] = v


def _per_node(ix: PortIndex, v: F64, how: str = "max") -> F64:
    out = np.zeros(ix.n_nodes)
    if how == "max":
        np.maximum.at(out, ix.port_node, v)
    else:
        np.add.at(out, ix.port_node, v)
    return out


def _switches(ix: PortIndex, sig: PortSignals, x: F64, cyc: B, paths: PathStats) -> None:
    sw = ix.switch_nodes
    has_peer = ix.peer >= 0
    peer = np.maximum(ix.peer, 0)
    # neighbours' ports that face this switch and still report, and which of them see
    # the link down (a silent neighbour says nothing; when a plane goes down, one
    # switch's neighbours are the others, and only the live ones can tell)
    heard = has_peer & ~sig.silent[peer]
    facing_down = np.where(heard, sig.oper_down[peer].astype(float), 0.0)
    n_ports = _per_node(ix, heard.astype(float), "sum")
    nbr_down = _per_node(ix, facing_down, "sum")
    lowq = np.where(sig.queue < 1e5, sig.ecn_ratio, 0.0)
    noecn = np.where((sig.ecn_ratio < 1e-4) & (sig.util_tx > 0.05), sig.queue / 1e6, 0.0)
    pause_sent = _per_node(ix, sig.pause_tx)
    pause_recv = _per_node(ix, sig.pause_rx)
    imb = sig.imbalance
    cols = {
        "s_missing": _per_node(ix, sig.node_missing.astype(float)),
        "s_nbr_down": nbr_down / np.maximum(n_ports, 1.0), "s_nbr_down_n": nbr_down,
        "s_imbalance": imb, "s_imbalance_rel": imb / max(float(imb.max(initial=0.0)), 1e-9),
        "s_ecn_max": _per_node(ix, sig.ecn_ratio), "s_ecn_lowq": _per_node(ix, lowq),
        "s_noecn_q": _per_node(ix, noecn), "s_pause_sent": pause_sent,
        "s_pause_recv": pause_recv, "s_origin": pause_sent * (1.0 - pause_recv),
        "s_cycle": _per_node(ix, cyc.astype(float)), "s_util": _per_node(ix, sig.util_tx),
        "s_polar": paths.agree, "s_polar_n": paths.agree_n, "s_polar_p": paths.polar_log_p(),
        "s_moved": paths.moved,
    }
    for name, v in cols.items():
        x[:, FCOL[name]] = v[sw]


def _nics(ix: PortIndex, sig: PortSignals, x: F64, paths: PathStats) -> None:
    p = ix.nic_ports
    t = np.maximum(ix.peer[p], 0)
    tor_node = ix.port_node[t]
    pause_sent = _per_node(ix, sig.pause_tx)
    pause = sig.pause_tx[p]
    cnp = sig.cnp_ratio[p]
    cols = {
        "n_pause_tx": pause, "n_pause_idle": np.where(sig.util_rx[p] < 0.02, pause, 0.0),
        "n_util_rx": sig.util_rx[p], "n_util_tx": sig.util_tx[p], "n_cnp": cnp,
        "n_retrans_log": _log(sig.retrans_ratio[p]), "n_ooo_log": _log(sig.ooo_ratio[p]),
        "n_missing": sig.missing[p].astype(float),
        "n_host_missing": sig.node_missing[p].astype(float),
        "n_down": (sig.oper_down[p] | sig.oper_down[t]).astype(float),
        "n_tor_ecn": sig.ecn_ratio[t], "n_tor_queue": sig.queue[t] / 1e6,
        "n_tor_pause_sent": pause_sent[tor_node],
        "n_fcs_log": np.maximum(_log(sig.fcs_ratio[p]), _log(sig.fcs_ratio[t])),
        "n_flaps": np.maximum(sig.flaps[p], sig.flaps[t]),
        "n_pause_rel": pause / max(float(pause.max(initial=0.0)), 1e-9),
        "n_cnp_rel": cnp / max(float(cnp.max(initial=0.0)), 1e-9),
        "n_fan_in": paths.fan_in, "n_rx_sustained": sig.rx_sustained[p],
    }
    for name, v in cols.items():
        x[:, FCOL[name]] = v
