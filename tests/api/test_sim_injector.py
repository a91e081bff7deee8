"""The API's fault switch plants wrong settings as well as faults in a running twin."""

from __future__ import annotations

import time

from fabricops.api.context import FaultRequest
from fabricops.api.sim_injector import SimFaultInjector
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.engine import Simulator
from tests.config.twin import leaf_spine_32


def test_an_injected_setting_fault_changes_the_running_configuration() -> None:
    fabric = SimulatedFabric(Simulator(leaf_spine_32()), SimulatedFabricConfig(speed=20.0))
    fabric.start()
    try:
        before = fabric.call(lambda sim: sim.settings.device_settings("leaf-1"))
        answer = SimFaultInjector(fabric).inject(
            FaultRequest.model_validate({"type": "ecn_threshold", "entity": "leaf-1"}))
        assert answer["type"] == "ecn_threshold"
        deadline = time.monotonic() + 30
        after = before
        while after == before and time.monotonic() < deadline:
            time.sleep(0.1)
            after = fabric.call(lambda sim: sim.settings.device_settings("leaf-1"))
    finally:
        fabric.stop()
    changed = {k for k in before if before[k] != after[k]}
    assert changed, "the wrong setting is in the running configuration"
    assert all(k.startswith("ports.") and ".ecn." in k for k in changed), sorted(changed)
