"""The analysis half of ``fabricops up``: the RCA and remediation services.

Both consume the bus like any other member of their consumer group. On the
simulated fabric, remediation acts through the simulator's control surface
between two ticks; port changes can go over real gNMI Set instead
(``--actuator gnmi``), to the fabric's own gNMI targets.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabricops.cli.lifecycle import Running
from fabricops.cli.preflight import StartupError, named
from fabricops.core.actions import ActionMode, StepOp
from fabricops.core.bus import Bus
from fabricops.core.inventory import Inventory
from fabricops.evaluation.sim_actuator import SimulatorActuator
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.rca.service import RcaService, RcaServiceConfig
from fabricops.remediation.actuator import Actuator, Actuators
from fabricops.remediation.engine import RemediationConfig, RemediationEngine
from fabricops.remediation.gnmi_actuator import GnmiSetActuator
from fabricops.remediation.service import RemediationService, RemediationServiceConfig
from fabricops.remediation.watch import FabricWatch
from fabricops.simulator.agents.service import SimulatedFabric
from fabricops.store.store import Store, StoreConfig

ACTUATORS = ("simulator", "gnmi")


@dataclass(frozen=True)
class Analysis:
    """The running RCA and remediation services and the store they share."""

    store: Store
    rca: RcaService
    remediation: RemediationService


def start_analysis(running: Running, bus: Bus, fabric: SimulatedFabric, db: str, *,
                   mode: ActionMode, actuator: str = "simulator",
                   inventory: Inventory | None = None) -> Analysis:
    """Start the store, RCA and remediation on ``bus`` for the simulated ``fabric``; each
    is stopped with the rest of ``running``, its workers reported to its liveness. The
    gNMI actuator reaches the targets as ``inventory`` says (TLS, login; default: the
    fabric's own, plain text)."""
    if actuator not in ACTUATORS:
        raise StartupError(f"--actuator {actuator}: must be one of {', '.join(ACTUATORS)}")
    sim = fabric.sim
    topo = sim.fabric.topology
    placement = sim.placement()
    store = Store(StoreConfig(url=db))
    with named("--db", store.url):
        store.start()
    running.started(store.stop)
    rca = RcaService(RcaServiceConfig(), bus, topo, RcaModel.load(DEFAULT_MODEL), store,
                     placement, registry=running.registry, liveness=running.liveness)
    config = RemediationConfig.model_validate({"safety": {"mode": mode.value}})
    # The configuration the twin starts with is the intent a wrong setting is restored to.
    intent = fabric.call(lambda sim: {n.id: dict(sim.settings.device_settings(n.id))
                                      for n in topo.switches()})
    engine = RemediationEngine(config, topo, _actuators(fabric, actuator, inventory),
                               FabricWatch(topo), placement, intent=intent)
    remediation = RemediationService(RemediationServiceConfig(), bus, engine, store,
                                     registry=running.registry, liveness=running.liveness)
    rca.start()
    running.started(rca.stop)
    remediation.start()
    running.started(remediation.stop)
    return Analysis(store, rca, remediation)


def _actuators(fabric: SimulatedFabric, kind: str, inventory: Inventory | None) -> Actuators:
    sim_act = SimulatorActuator(fabric.call)
    by_op: dict[StepOp, Actuator] = dict.fromkeys(sim_act.ops, sim_act)
    if kind == "gnmi":
        gnmi = GnmiSetActuator.for_inventory(inventory or fabric.inventory())
        by_op.update(dict.fromkeys(gnmi.ops, gnmi))
    return Actuators(by_op)
