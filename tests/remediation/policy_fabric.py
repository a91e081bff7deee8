"""The fabric of the policy and safety tests, a diagnosis on it, and its policy."""

from __future__ import annotations

from fabricops.core.records import Diagnosis
from fabricops.core.topology import Topology
from fabricops.remediation.policy import Policy, PolicyConfig
from fabricops.simulator.builders import build

TOPO: Topology = build("leaf_spine", gpus=64, nics_per_host=4, leaf_radix=16, spine_radix=16)
HOSTS = [n.id for n in TOPO.hosts()]
PLACEMENT = {"job-a": HOSTS[:-4]}
SWITCH_LINKS = [lk.id for lk in TOPO.links if not (TOPO.port_by_id[lk.a][0].is_host
                                                   or TOPO.port_by_id[lk.b][0].is_host)]
HOST_LINKS = [lk.id for lk in TOPO.links if lk.id not in SWITCH_LINKS]
NICS = list(TOPO.nics())
SWITCHES = [n.id for n in TOPO.switches()]


def diagnosis(fault: str, root: str, confidence: float = 0.95, did: str = "dx-1") -> Diagnosis:
    return Diagnosis(id=did, ts_ns=1, onset_ns=1, root=root, root_kind="link",
                     fault_type=fault, confidence=confidence, affected_jobs=("job-a",))


def policy() -> Policy:
    return Policy(PolicyConfig(), TOPO, {k: list(v) for k, v in PLACEMENT.items()})
