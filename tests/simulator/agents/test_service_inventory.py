"""The inventory a running twin offers: its agents, polled as it says, answer even when
the process serving them is busy."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig
from fabricops.collectors.snmp_config import targets_from_inventory
from fabricops.core.sinks import ListSink
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import Simulator


@pytest.fixture
def fabric() -> Iterator[SimulatedFabric]:
    twin = SimulatedFabric(Simulator(leaf_spine(gpus=16)),
                           SimulatedFabricConfig(snmp_interval_s=1.0))
    twin.start()
    try:
        twin.board.wait_tick(0, 30.0)
        yield twin
    finally:
        twin.stop()


def hold_agent(fabric: SimulatedFabric, seconds: float) -> None:
    """Keep the twin's SNMP agent from answering for ``seconds`` (as a busy process would)."""
    loop = fabric.snmp._loop
    assert loop is not None
    held = threading.Event()

    def busy() -> None:
        held.set()
        time.sleep(seconds)

    loop.call_soon_threadsafe(busy)
    assert held.wait(10.0), "the agent's loop never ran the hold"


def test_every_snmp_target_of_the_offered_inventory_waits_out_a_busy_twin(
    fabric: SimulatedFabric,
) -> None:
    inventory = fabric.inventory()
    snmp = inventory.by_protocol("snmp")
    assert {t.device for t in snmp} == set(fabric.switches)
    assert {t.snmp.timeout_s for t in snmp if t.snmp is not None} == {5.0}
    sink = ListSink()
    poller = SnmpPoller(SnmpPollerConfig(targets=targets_from_inventory(inventory)), sink,
                        CollectorRegistry())
    poller.start(schedule=False)
    try:
        # Longer than two tries of a switch's usual 1-s timeout, shorter than one of 5 s.
        hold_agent(fabric, 3.0)
        started = time.monotonic()
        status = poller.collect_once()
        waited = time.monotonic() - started
    finally:
        poller.stop()
    assert {d: s.up for d, s in status.items()} == dict.fromkeys(fabric.switches, True)
    assert waited >= 2.5, "the poll went out while the agent was held"
    assert sink.devices() == set(fabric.switches)
