"""IntPaths: flow paths from INT reports, for path voting and flow moves.

``IntPaths`` keeps, per sampled flow, the links it crossed (its two NIC links
and every egress port's link), and notes every flow that left a switch by
another port than it did before (a move: in a stable ECMP fabric flows only
move when a link changes state).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fabricops.core.intreport import INVALID, IntBatch
from fabricops.rca.view import IP_BASE, PortIndex

F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


class IntPaths:
    """Recently seen flow paths from INT reports, as link indices (for path voting)."""

    def __init__(self, index: PortIndex, *, keep_s: float = 30.0) -> None:
        self.index = index
        self.keep_ns = int(keep_s * 1e9)
        self._paths: dict[tuple[int, int, int], tuple[int, tuple[int, ...]]] = {}
        self._egress: dict[tuple[int, int, int], tuple[int, ...]] = {}
        self._moves: list[tuple[int, int, int, tuple[int, ...]]] = []  # ts, old, new, nodes
        self.reports_unnamed = 0

    def ingest(self, batch: IntBatch) -> None:
        ix = self.index
        n_nic = len(ix.nic_ports)
        starts, counts = batch.hop_start.tolist(), batch.hop_count.tolist()
        nodes, egress = batch.node_id.tolist(), batch.egress_port.tolist()
        src = (batch.src_ip.astype(np.int64) - IP_BASE).tolist()
        dst = (batch.dst_ip.astype(np.int64) - IP_BASE).tolist()
        for i, ts in enumerate(batch.ts_ns.tolist()):
            s, d = src[i], dst[i]
            if not (0 <= s < n_nic and 0 <= d < n_nic):
                self.reports_unnamed += 1
                continue
            links = [int(ix.port_link[ix.nic_ports[s]])]
            ports = []
            for h in range(starts[i], starts[i] + counts[i]):
                if egress[h] == INVALID["egress_port"]:
                    continue
                p = ix.int_port.get((nodes[h], egress[h]))
                if p is not None and ix.port_link[p] >= 0:
                    links.append(int(ix.port_link[p]))
                    ports.append(p)
            links.append(int(ix.port_link[ix.nic_ports[d]]))
            key = (s, d, int(batch.sport[i]))
            before = self._egress.get(key)
            if before is not None and tuple(ports) != before:
                old_links = self._paths[key][1] if key in self._paths else ()
                self._note_moves(ts, before, ports, (*old_links, *links))
            self._paths[key] = (ts, tuple(dict.fromkeys(links)))
            self._egress[key] = tuple(ports)

    def _note_moves(self, ts: int, before: tuple[int, ...], after: list[int],
                    links: tuple[int, ...]) -> None:
        ix = self.index
        node_of = ix.port_node
        now = {int(node_of[p]): p for p in after}
        nodes = tuple({int(n) for n in node_of[ix.link_ports[list(links)]].ravel()}) \
            if links else ()
        for p in before:
            q = now.get(int(node_of[p]))
            if q is not None and q != p:
                self._moves.append((ts, p, q, nodes))

    def moves(self, now_ns: int, uplink: B, unstable: B) -> F64:
        """Per node: flows that moved from one uplink to another within ``keep_s``.

        ``unstable`` is per node (an end of a link that is down or flapping, or a
        node with a silent port): a move at such a node, or of a flow whose old or
        new path crosses one, is forgotten for good, since every ECMP group that
        loses or regains a member re-hashes its flows. Moves elsewhere still count
        while a link flaps.
        """
        node_of = self.index.port_node
        kept = [m for m in self._moves
                if now_ns - m[0] <= self.keep_ns and not unstable[node_of[m[1]]]
                and not any(unstable[n] for n in m[3])]
        self._moves = kept
        out = np.zeros(self.index.n_nodes)
        if not kept:
            return out
        old = np.fromiter((m[1] for m in kept), np.int64, len(kept))
        new = np.fromiter((m[2] for m in kept), np.int64, len(kept))
        ok = uplink[old] & uplink[new]
        np.add.at(out, node_of[old[ok]], 1.0)
        return out

    def recent(self, now_ns: int) -> list[tuple[int, int, tuple[int, ...]]]:
        """(src NIC, dst NIC, links) of every flow reported within ``keep_s``."""
        old = [k for k, (ts, _) in self._paths.items() if now_ns - ts > self.keep_ns]
        for k in old:
            del self._paths[k]
            self._egress.pop(k, None)
        return [(k[0], k[1], links) for k, (_, links) in self._paths.items()]

    def hash_agreement(self, uplink: B) -> tuple[F64, F64]:
        """Per node: of flow pairs with the same NICs but different source ports that
        left the node by an uplink, the share that took the same uplink, and how many.

        ECMP spreads such pairs over the uplinks (agreement about 1/uplinks); a
        switch that ignores the source port (hash polarization) sends them all
        the same way (agreement 1).
        """
        ix = self.index
        agree, total = np.zeros(ix.n_nodes), np.zeros(ix.n_nodes)
        groups: dict[tuple[int, int], list[tuple[int, ...]]] = {}
        for (s, d, _), ports in self._egress.items():
            groups.setdefault((s, d), []).append(ports)
        for members in groups.values():
            if len(members) < 2:
                continue
            first: dict[int, int] = {}
            for ports in members:
                for p in ports:
                    if not uplink[p]:
                        continue
                    node = int(ix.port_node[p])
                    if node in first:
                        total[node] += 1
                        agree[node] += first[node] == p
                    else:
                        first[node] = p
        share = np.where(total > 0, agree / np.maximum(total, 1.0), 0.0)
        return share, total

    def fan_in(self) -> F64:
        """Per NIC (in NIC order): distinct sender NICs among recently reported flows to it."""
        senders: dict[int, set[int]] = {}
        for s, d, _ in self._paths:
            senders.setdefault(d, set()).add(s)
        out = np.zeros(len(self.index.nic_ports))
        for d, ss in senders.items():
            out[d] = len(ss)
        return out
