"""Shared by the gNMI target tests: their fabric, a job streaming on it, gNMI paths and Gets."""

from __future__ import annotations

from typing import Any

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.openconfig import parse_path
from fabricops.core.topology import Topology
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec

# pygnmi's reader thread raises CANCELLED when its channel closes before the stream's end.
PYGNMI_STREAM = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnhandledThreadExceptionWarning")


@pytest.fixture(scope="module")
def fabric() -> Topology:
    return leaf_spine(gpus=64)


def streaming_sim(fabric: Topology) -> Simulator:
    sim = Simulator(fabric, SimConfig(seed=5))
    sim.add_job(JobSpec(hosts=8, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    return sim


def _updates(result: dict[str, Any]) -> dict[str, Any]:
    """pygnmi Get result -> {path: value}."""
    return {u["path"]: u["val"] for n in result["notification"] for u in n["update"]}


def _gnmi_path(text: str) -> Any:
    return gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=e.name, key=dict(e.keys))
                               for e in parse_path(text)])
