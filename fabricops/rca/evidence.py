"""What a diagnosis shows an engineer: evidence, affected hosts and jobs, the remedy.

Evidence lists the symptoms on the root entity first, then the strongest
signals on its ports. Affected hosts are those whose INT-observed flows cross
the root (plus the hosts under a root switch, or the root NIC's own host);
affected jobs are the jobs placed on those hosts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np

from fabricops.core.records import Evidence
from fabricops.rca.detect import Symptom
from fabricops.rca.features import LINK, SWITCH, Candidates
from fabricops.rca.signals import PortSignals
from fabricops.rca.view import PortIndex

ACTIONS: Final = {
    "link_down": "drain the link from ECMP and replace the cable or optic",
    "link_flap": "shut the flapping link, then replace the cable or optic",
    "gray_loss": "drain the link from ECMP (path switch); replace the cable or optic",
    "optic_degradation": "drain the link before it fails; replace the optic",
    "hash_polarization": "re-seed the switch's ECMP hash or re-label flows",
    "incast": "spread the senders or rate-limit them; check the job's communication pattern",
    "pfc_storm": "isolate the NIC's switch port (PFC watchdog), then replace the node",
    "slow_receiver": "drain the host from the job and attach a spare",
    "nic_down": "drain the host from the job and attach a spare",
    "switch_down": "confirm traffic has moved off the switch and open a ticket",
    "pfc_deadlock": "break the cycle: drain one link of it and reset the paused queues",
    "ecn_misconfig": "restore the switch's ECN profile of the lossless queue (settings "
                     "ecn.min_threshold_bytes, ecn.max_threshold_bytes, "
                     "ecn.mark_probability_pct, ecn.enabled on its ports) to intent",
}
#: What a configuration symptom says about a setting (see fabricops.core.roce_settings).
SETTING_NOTES: Final = {
    "ecn_below_kmin": "; setting ecn.min_threshold_bytes: packets are marked while the "
                      "queue is below the usual Kmin, so the threshold is set too low",
}
_SIGNALS: Final = ("fcs_ratio", "pause_tx", "pause_rx", "ecn_ratio", "rx_drop_db", "flaps",
                   "retrans_ratio", "cnp_ratio", "util_tx")


def root_ports(ix: PortIndex, cand: Candidates, i: int) -> np.ndarray:
    """Port indices that belong to candidate ``i``."""
    kind = cand.kind[i]
    if kind == LINK:
        ends: np.ndarray = ix.link_ports[i]
        return ends
    if kind == SWITCH:
        node = ix.switch_nodes[i - cand.n_links]
        return np.flatnonzero(ix.port_node == node)
    return np.array([ix.nic_ports[i - cand.n_links - cand.n_switches]])


def evidence_for(ix: PortIndex, cand: Candidates, i: int, sig: PortSignals,
                 symptoms: Sequence[Symptom]) -> list[Evidence]:
    out = [Evidence(entity=cand.names[i], signal=s.rule, value=s.value,
                    note=f"rule suggests {s.fault_type}" + SETTING_NOTES.get(s.rule, ""))
           for s in sorted((s for s in symptoms if s.candidate == i),
                           key=lambda s: -s.severity)]
    seen = {(e.entity, e.signal) for e in out}
    for p in root_ports(ix, cand, i).tolist():
        for name in _SIGNALS:
            v = float(getattr(sig, name)[p])
            if v > 0 and (ix.port_ids[p], name) not in seen:
                out.append(Evidence(entity=ix.port_ids[p], signal=name, value=round(v, 9)))
    if cand.kind[i] == SWITCH:
        node = ix.switch_nodes[i - cand.n_links]
        if sig.imbalance[node] > 0:
            out.append(Evidence(entity=cand.names[i], signal="ecmp_imbalance_excess",
                                value=round(float(sig.imbalance[node]), 4)))
    return out


def affected(ix: PortIndex, cand: Candidates, i: int,
             flows: Sequence[tuple[int, int, tuple[int, ...]]],
             jobs: Mapping[str, Sequence[str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Hosts and jobs the root touches."""
    kind = cand.kind[i]
    hosts: set[int] = set()
    nic_host = ix.port_node[ix.nic_ports]
    if kind == LINK:
        links = {i}
    elif kind == SWITCH:
        node = ix.switch_nodes[i - cand.n_links]
        ports = np.flatnonzero(ix.port_node == node)
        links = set(ix.port_link[ports][ix.port_link[ports] >= 0].tolist())
        peers = ix.peer[ports][ix.peer[ports] >= 0]
        hosts |= {int(n) for n in ix.port_node[peers] if ix.node_is_host[n]}
    else:
        nic = i - cand.n_links - cand.n_switches
        links = {int(ix.port_link[ix.nic_ports[nic]])}
        hosts.add(int(nic_host[nic]))
    for s, d, path in flows:
        if links.intersection(path):
            hosts.update((int(nic_host[s]), int(nic_host[d])))
    names = tuple(sorted(ix.node_ids[h] for h in hosts))
    on = set(names)
    job_names = tuple(sorted(j for j, hs in jobs.items() if on.intersection(hs)))
    return names, job_names
