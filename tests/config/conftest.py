"""Fabrics the config tests plan: a tiny one for golden files and a 64-GPU leaf-spine."""

from __future__ import annotations

import pytest

from fabricops.config.plan import FabricPlan, plan_fabric
from fabricops.core.topology import Topology
from fabricops.simulator.builders import leaf_spine


def tiny_topology() -> Topology:
    """2 hosts x 2 NICs, 2 leaves (eth1-2 to hosts, eth3-4 up), 1 spine; 400G everywhere."""
    return leaf_spine(gpus=4, nics_per_host=2, leaf_radix=4, spine_radix=4, name="tiny")


@pytest.fixture
def tiny() -> Topology:
    return tiny_topology()


@pytest.fixture
def tiny_plan() -> FabricPlan:
    return plan_fabric(tiny_topology())


@pytest.fixture
def gpu64() -> Topology:
    return leaf_spine(gpus=64, name="gpu64")
