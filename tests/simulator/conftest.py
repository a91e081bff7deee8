"""Shared builders for simulator tests: small fabrics with a streaming job."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from fabricops.core.topology import Topology
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec

STREAM = {"compute_s": 0.0, "comm_bytes_per_nic": 1e15}


@pytest.fixture(scope="session")
def fabric512() -> Topology:
    return leaf_spine(gpus=512)


@pytest.fixture
def streaming(fabric512: Topology) -> Callable[..., Simulator]:
    """A 512-GPU leaf-spine with one job streaming its collective without pause."""

    def make(seed: int = 3, hosts: int = 60, **config: object) -> Simulator:
        sim = Simulator(fabric512, SimConfig(seed=seed, **config))  # type: ignore[arg-type]
        sim.add_job(JobSpec(hosts=hosts, placement="random", **STREAM))  # type: ignore[arg-type]
        return sim

    return make


def busiest_fabric_link(sim: Simulator) -> int:
    """Index of the switch-to-switch link carrying the most traffic in the last tick."""
    assert sim.last is not None
    fab = sim.fabric
    tx, rx = fab.ch_tx_node()[::2], fab.ch_rx_node()[::2]
    inter = ~fab.node_is_host[tx] & ~fab.node_is_host[rx]
    load = sim.last.served_bps[: fab.n_channels : 2] + sim.last.served_bps[1 : fab.n_channels : 2]
    return int(np.argmax(np.where(inter, load, -1.0)))


def crossing(sim: Simulator, link: int) -> np.ndarray:
    """Mask of flows whose path crosses ``link``."""
    return (sim.paths // 2 == link).any(axis=1)
