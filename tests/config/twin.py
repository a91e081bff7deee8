"""A small twin provisioned with a plan, and the pieces the configuration tests share."""

from __future__ import annotations

from typing import Any

from fabricops.config.apply import ConfigApplier
from fabricops.config.plan import FabricPlan, plan_fabric
from fabricops.config.running import Settings, intended_settings
from fabricops.config.validate import TrafficMeasurement, ValidationBounds, judge
from fabricops.core.actions import ActionMode
from fabricops.core.topology import Topology
from fabricops.evaluation.sim_actuator import SimulatorActuator, direct
from fabricops.remediation.actuator import Actuators
from fabricops.remediation.engine import RemediationConfig, RemediationEngine
from fabricops.remediation.safety import SafetyConfig
from fabricops.remediation.watch import FabricWatch
from fabricops.simulator.builders import fat_tree, leaf_spine
from fabricops.simulator.engine import Simulator
from fabricops.simulator.validation import TrafficSpec, run_traffic


def leaf_spine_32() -> Topology:
    """32 GPUs: 4 hosts x 8 NICs, 4 leaves (8 down, 8 up), 8 spines; 400G."""
    return leaf_spine(gpus=32, leaf_radix=16, spine_radix=8, name="ls32")


def fat_tree_16() -> Topology:
    """A k=4 fat-tree: 16 single-NIC hosts, leaves, aggs and cores."""
    return fat_tree(k=4, nics_per_host=1, name="ft16")


def read(sim: Simulator) -> Any:
    """A SettingsReader over the twin, in process."""
    def reader(devices: list[str]) -> tuple[dict[str, Settings], dict[str, str]]:
        return {d: sim.settings.device_settings(d) for d in devices}, {}
    return reader


def provisioned(topo: Topology) -> tuple[Simulator, FabricPlan]:
    """A twin running its plan (applied straight to the running configuration)."""
    sim = Simulator(topo)
    plan = plan_fabric(topo)
    for device, values in intended_settings(plan).items():
        sim.settings.set(device, values)
    return sim, plan


def engine_for(sim: Simulator, mode: ActionMode = ActionMode.AUTO,
               intent: dict[str, Settings] | None = None) -> RemediationEngine:
    """Remediation in ``mode`` acting on the twin; ``intent`` for settings it restores."""
    topo = sim.fabric.topology
    return RemediationEngine(RemediationConfig(safety=SafetyConfig(mode=mode)), topo,
                             Actuators.single(SimulatorActuator(direct(sim))),
                             FabricWatch(topo), intent=intent)


def applier(sim: Simulator, plan: FabricPlan,
            mode: ActionMode = ActionMode.AUTO) -> ConfigApplier:
    return ConfigApplier(engine_for(sim, mode), read(sim), plan.fabric.name, mode)


def traffic(sim: Simulator, pattern: str = "all_to_all", bursts: int = 2) -> TrafficMeasurement:
    raw = run_traffic(sim, TrafficSpec(pattern=pattern, bursts=bursts))  # type: ignore[arg-type]
    return TrafficMeasurement.model_validate(raw)


def passes(m: TrafficMeasurement) -> bool:
    return all(v.ok for v in judge(m, ValidationBounds()))
