"""What remediation sees of the fabric: symptoms and port loads, from telemetry only.

``FabricWatch`` runs the RCA's view, signals and detection rules (no model)
over the same telemetry the RCA consumes. After each ``step`` it offers the
symptoms that fired, by entity, the recent transmit utilization of every
port (for the pre-check) and the entities near a root (for verification).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from fabricops.core.frame import Frame
from fabricops.core.intreport import IntBatch
from fabricops.core.topology import Topology
from fabricops.rca.engine import RcaConfig, RcaEngine
from fabricops.rca.features import LINK, SWITCH

F64 = npt.NDArray[np.float64]


class FabricWatch:
    """Symptoms and loads of the fabric, step by step (see the module docstring)."""

    def __init__(self, topology: Topology, config: RcaConfig | None = None,
                 load_alpha: float = 0.1) -> None:
        self.engine = RcaEngine(topology, None, config)
        ix, cand = self.engine.index, self.engine.candidates
        self.load_alpha = load_alpha
        self.util_tx: F64 = np.zeros(ix.n_ports)  # smoothed, for the pre-check
        self.current_util: F64 = np.zeros(ix.n_ports)
        self.oper_down = np.zeros(ix.n_ports, bool)
        self.symptoms: dict[str, list[str]] = {}
        self.ts_ns = -1
        nodes: list[frozenset[int]] = []
        for i, kind in enumerate(cand.kind.tolist()):
            if kind == LINK:
                nodes.append(frozenset(ix.port_node[ix.link_ports[i]].tolist()))
            elif kind == SWITCH:
                nodes.append(frozenset({int(ix.switch_nodes[i - cand.n_links])}))
            else:
                nic = int(ix.port_of[cand.names[i]])
                nodes.append(frozenset({int(ix.port_node[nic])}))
        self._nodes = nodes
        self._of = {name: i for i, name in enumerate(cand.names)}

    @property
    def warm(self) -> bool:
        return self.engine.steps > self.engine.config.warmup_steps

    def ingest_frames(self, frames: Iterable[Frame]) -> None:
        self.engine.ingest_frames(frames)

    def ingest_int(self, batch: IntBatch) -> None:
        self.engine.ingest_int(batch)

    def step(self, now_ns: int | None = None) -> None:
        """Analyse the newest telemetry (or as of ``now_ns``)."""
        if self.engine.view.newest_ns < 0:
            return
        result = self.engine.step(now_ns)
        self.ts_ns = result.ts_ns
        util = np.nan_to_num(result.signals.util_tx, nan=0.0)
        self.util_tx += self.load_alpha * (util - self.util_tx)
        self.current_util = util
        self.oper_down = result.signals.oper_down
        names = self.engine.candidates.names
        found: dict[str, list[str]] = {}
        for s in result.symptoms:
            found.setdefault(names[s.candidate], []).append(s.rule)
        self.symptoms = found

    def load_tx(self) -> F64:
        """Smoothed transmit utilization per port; 0 where the link is down (its traffic
        has nowhere to be moved from)."""
        out: F64 = np.where(self.oper_down, 0.0, self.util_tx)
        return out

    def nodes_of(self, entity: str) -> frozenset[str]:
        """The nodes an entity (link, switch, NIC, host) touches."""
        ix = self.engine.index
        if entity in ix.node_of:
            return frozenset({entity})
        i = self._of.get(entity)
        if i is None:
            return frozenset()
        return frozenset(ix.node_ids[n] for n in self._nodes[i])

    def symptoms_near(self, nodes: frozenset[str],
                      exclude: frozenset[str]) -> dict[str, list[str]]:
        """Symptoms on entities touching any of ``nodes``, except the ``exclude``d entities
        and anything touching only excluded nodes."""
        near = {}
        for entity, rules in self.symptoms.items():
            if entity in exclude:
                continue
            touched = self.nodes_of(entity)
            if touched & nodes and not touched <= exclude:
                near[entity] = rules
        return near

    def util_of(self, ports: Iterable[str]) -> float:
        """Highest current transmit utilization among ``ports``."""
        ix = self.engine.index
        idx = [ix.port_of[p] for p in ports if p in ix.port_of]
        return float(self.current_util[idx].max()) if idx else 0.0
