"""Job placement: which hosts each training job runs on, as a YAML file.

    jobs:
      job-llm-01: [host-000, host-001, host-007]

The RCA uses it to name the jobs a fault hurts; remediation to replace a
node inside its job. A scheduler integration writes it; the simulated fabric
writes its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from fabricops.core.topology import Topology
from fabricops.core.yamlfile import read_yaml


class PlacementError(ValueError):
    """A placement file that cannot be used; the message names the file and the job."""


def load_placement(path: str | Path, topology: Topology | None = None) -> dict[str, list[str]]:
    """Jobs to hosts from ``path``; every host must exist in ``topology`` if given."""
    p = Path(path)
    doc = read_yaml(p, "job placement", PlacementError)
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, dict):
        raise PlacementError(f"{p}: expected a mapping 'jobs: {{JOB: [HOST, ...]}}'")
    out: dict[str, list[str]] = {}
    for job, hosts in jobs.items():
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise PlacementError(f"{p}: job {job!r}: expected a list of host names")
        unknown = [h for h in hosts if topology is not None and h not in topology.node_by_id]
        if unknown:
            raise PlacementError(f"{p}: job {job!r}: hosts not in the topology: "
                                 f"{', '.join(unknown[:5])}")
        out[str(job)] = list(hosts)
    return out


def save_placement(jobs: Mapping[str, Sequence[str]], path: str | Path) -> Path:
    p = Path(path)
    p.write_text(yaml.safe_dump({"jobs": {j: list(h) for j, h in jobs.items()}},
                                sort_keys=True), encoding="utf-8")
    return p
