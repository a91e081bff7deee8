"""Incidents whose root went quiet because nothing crosses it any more, not because it healed.

A fault's symptoms need traffic: a link that corrupts frames shows FCS errors
only while frames cross it. When a second fault stalls the job (a deadlock, a
storm), the first root falls silent and its symptoms stop, although nothing
was repaired. Such an incident is *held*: its latest diagnosis is published
again, with one piece of evidence saying the root carries no traffic, until
traffic returns (then the analysis confirms or clears it as usual) or
``hold_s`` passes after its last fresh evidence.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from fabricops.core.records import Diagnosis, Evidence
from fabricops.rca.signals import PortSignals
from fabricops.rca.view import PortIndex

F64 = npt.NDArray[np.float64]
QUIET: Final = 0.01  # transmit plus receive utilization of a candidate's ports, summed
HELD_SIGNAL: Final = "no_traffic"


def candidate_activity(ix: PortIndex, sig: PortSignals) -> F64:
    """Per candidate, in ``Candidates.of(ix)`` order (links, switches, NICs): the summed
    transmit and receive utilization of its ports; a port without data counts as idle."""
    port = np.nan_to_num(sig.util_tx, nan=0.0) + np.nan_to_num(sig.util_rx, nan=0.0)
    links = port[ix.link_ports[:, 0]] + port[ix.link_ports[:, 1]]
    nodes = np.bincount(ix.port_node, weights=port, minlength=ix.n_nodes)
    out: F64 = np.concatenate((links, nodes[ix.switch_nodes], port[ix.nic_ports]))
    return out


def held(d: Diagnosis, ts_ns: int, fresh_ns: int) -> Diagnosis:
    """``d`` published again at ``ts_ns``: the same incident, root and scores, its
    evidence led by the root's silence since its last fresh evidence ``fresh_ns``."""
    quiet = Evidence(entity=d.root, signal=HELD_SIGNAL, value=round((ts_ns - fresh_ns) / 1e9, 3),
                     note="no traffic crosses the root: its symptoms cannot show, so the "
                          "incident stays open on its last evidence (seconds since)")
    rest = tuple(e for e in d.evidence if e.signal != HELD_SIGNAL)
    return d.model_copy(update={"ts_ns": ts_ns, "evidence": (quiet, *rest)[:16]})
