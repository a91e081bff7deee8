"""SimFaultInjector: the API's fault switch, wired to a running simulated fabric.

Only a process that runs the simulated fabric imports this module.

A fault starts at the twin's current time (between two ticks) and lasts
``duration_s`` or until the run ends. The simulator validates the target and
the parameters; its FaultError (a ValueError) names what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabricops.api.context import FaultRequest
from fabricops.simulator.agents.service import SimulatedFabric
from fabricops.simulator.engine import Simulator
from fabricops.simulator.faults import parse_fault


class SimFaultInjector:
    """See the module docstring."""

    def __init__(self, fabric: SimulatedFabric) -> None:
        self.fabric = fabric

    def inject(self, request: FaultRequest) -> Mapping[str, Any]:
        def add(sim: Simulator) -> dict[str, Any]:
            doc = {"type": request.type.value, "entity": request.entity,
                   "start_s": sim.time_s, "duration_s": request.duration_s,
                   "params": dict(request.params)}
            fault_id = sim.add_fault(parse_fault(doc, len(sim.faults.faults)))
            spec = sim.faults.faults[fault_id].spec
            return {"fault_id": fault_id, "type": spec.type.value, "entity": spec.entity,
                    "start_s": spec.start_s, "duration_s": spec.duration_s,
                    "params": spec.params}
        return self.fabric.call(add)
