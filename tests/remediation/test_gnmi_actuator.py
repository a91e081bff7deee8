"""GnmiSetActuator against the simulated fabric's gNMI target, and its failures."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from fabricops.core.actions import Action, ActionKind, Step, StepOp
from fabricops.core.inventory import GnmiCredentials, Inventory, Target
from fabricops.core.topology import Topology
from fabricops.remediation.actuator import ActuatorError, Actuators, UnreachableError, inverse
from fabricops.remediation.gnmi_actuator import (
    GnmiSetActuator,
    GnmiSetConfig,
    hash_get_request,
    probe_request,
    set_enabled_request,
    set_hash_request,
)
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.driver import DriverConfig, SimulationDriver
from fabricops.simulator.agents.gnmi_selfsigned import self_signed_pair
from fabricops.simulator.agents.gnmi_set import DriverSetHandler
from fabricops.simulator.agents.gnmi_target import GnmiTarget, GnmiTargetConfig
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.workload import JobSpec

PORT = "leaf-1:eth40"
OPER_UP, OPER_DOWN = 1, 2
ActionFactory = Callable[..., Action]


@dataclass
class Fabric:
    board: FrameBoard
    driver: SimulationDriver
    target: GnmiTarget

    def admin_up(self, port: str) -> bool:
        def read(sim: Simulator) -> bool:
            fab = sim.fabric
            return bool(sim.admin_up[int(fab.port_tx_ch[fab.port_index(port)]) // 2])
        return self.driver.call(read)

    def hash_l4(self, switch: str) -> bool:
        return self.driver.call(lambda sim: sim.control.ecmp_hash_l4(switch))

    def oper_status(self, port: str) -> int | float:
        """The port's oper-status in the telemetry of the next tick."""
        self.board.wait_tick(self.board.tick + 1, timeout_s=5)
        values = self.board.values(port.split(":")[0])
        assert values is not None
        return values.values[(port, "oper_status")]


@pytest.fixture(scope="module")
def topology() -> Topology:
    return leaf_spine(gpus=64)


@pytest.fixture
def fabric(topology: Topology) -> Iterator[Fabric]:
    sim = Simulator(topology, SimConfig(seed=5))
    sim.add_job(JobSpec(hosts=8, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    board = FrameBoard()
    driver = SimulationDriver(sim, board, DriverConfig(speed=20.0))
    target = GnmiTarget(GnmiTargetConfig(), board, [n.id for n in topology.switches()],
                        DriverSetHandler(driver))
    driver.start()
    target.start()
    try:
        yield Fabric(board, driver, target)
    finally:
        target.stop()
        driver.stop()


def _actuator(fabric: Fabric, registry: CollectorRegistry | None = None,
              timeout_s: float = 5.0) -> GnmiSetActuator:
    addresses = dict.fromkeys(fabric.target.switches, fabric.target.address)
    return GnmiSetActuator(GnmiSetConfig(timeout_s=timeout_s), addresses, registry=registry)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_request_updates_the_enabled_leaf_of_the_device() -> None:
    request = set_enabled_request("leaf-1", "Ethernet1/1", False)
    (update,) = request.update
    assert request.prefix.target == "leaf-1"
    assert [e.name for e in update.path.elem] == ["interfaces", "interface", "config", "enabled"]
    assert dict(update.path.elem[1].key) == {"name": "Ethernet1/1"}
    assert update.val.WhichOneof("value") == "bool_val"
    assert update.val.bool_val is False
    assert not request.replace
    assert not request.delete


@pytest.mark.integration
def test_an_actuator_from_a_secured_inventory_sets_over_tls_with_the_login(
        topology: Topology, tmp_path: Path, make_action: ActionFactory) -> None:
    cert, key = self_signed_pair(tmp_path)
    sim = Simulator(topology, SimConfig(seed=5))
    board = FrameBoard()
    driver = SimulationDriver(sim, board, DriverConfig(speed=20.0))
    target = GnmiTarget(GnmiTargetConfig(tls_cert_file=cert, tls_key_file=key,
                                         username="ops", password=SecretStr("pw")),
                        board, [n.id for n in topology.switches()], DriverSetHandler(driver))
    driver.start()
    target.start()
    try:
        fabric = Fabric(board, driver, target)
        inventory = Inventory(targets=[Target(
            device=s, protocol="gnmi", address=target.address,
            gnmi=GnmiCredentials(insecure=False, ca_file=cert, username="ops", password="pw"))
            for s in target.switches])
        actuator = GnmiSetActuator.for_inventory(inventory)
        shut = Step(op=StepOp.SHUT_PORT, target=PORT)
        actuator.check(shut)  # asked over TLS with the login: it answers
        assert actuator.registry.get_sample_value(
            "fabricops_gnmi_set_checks_total", {"outcome": "answered"}) == 1
        assert actuator.apply(shut, make_action(ActionKind.ISOLATE_PORT, PORT, shut)) == {}
        assert not fabric.admin_up(PORT)
        wrong = Inventory(targets=[t.model_copy(update={"gnmi": t.gnmi.model_copy(
            update={"password": "nope"})}) for t in inventory.targets])
        undo = Step(op=StepOp.NO_SHUT_PORT, target=PORT)
        refused = GnmiSetActuator.for_inventory(wrong)
        refused.check(undo)  # a wrong login is refused: the device is there, apply says why
        with pytest.raises(ActuatorError, match=PORT):
            refused.apply(undo, make_action(ActionKind.ISOLATE_PORT, PORT, undo))
        assert not fabric.admin_up(PORT)
    finally:
        target.stop()
        driver.stop()


@pytest.mark.integration
def test_shut_then_no_shut_changes_the_simulated_switch(
        fabric: Fabric, make_action: ActionFactory) -> None:
    registry = CollectorRegistry()
    actuators = Actuators.single(_actuator(fabric, registry))
    shut = Step(op=StepOp.SHUT_PORT, target=PORT)
    action = make_action(ActionKind.ISOLATE_PORT, PORT, shut)
    assert fabric.admin_up(PORT)
    assert fabric.oper_status(PORT) == OPER_UP

    name, facts = actuators.apply(shut, action)
    assert (name, facts) == ("gnmi", {})
    assert not fabric.admin_up(PORT)
    assert fabric.oper_status(PORT) == OPER_DOWN
    actuators.apply(shut, action)  # applying twice is applying once
    assert not fabric.admin_up(PORT)

    (undo,) = inverse(shut, facts)
    assert undo == Step(op=StepOp.NO_SHUT_PORT, target=PORT)
    actuators.apply(undo, action)
    assert fabric.admin_up(PORT)
    assert fabric.oper_status(PORT) == OPER_UP
    assert fabric.admin_up("leaf-1:eth41")
    assert registry.get_sample_value("fabricops_gnmi_set_steps_total",
                                     {"op": "shut_port", "outcome": "ok"}) == 2
    assert registry.get_sample_value("fabricops_gnmi_set_steps_total",
                                     {"op": "no_shut_port", "outcome": "ok"}) == 1


@pytest.mark.integration
def test_set_hash_changes_the_simulated_switchs_hashing_and_its_undo_restores_it(
        fabric: Fabric, make_action: ActionFactory) -> None:
    registry = CollectorRegistry()
    actuators = Actuators.single(_actuator(fabric, registry))
    fabric.driver.call(lambda sim: sim.add_fault(FaultSpec(
        type="hash_polarization", entity="leaf-1", start_s=sim.time_s)))
    fabric.board.wait_tick(fabric.board.tick + 1, timeout_s=5)
    assert not fabric.hash_l4("leaf-1")
    fix = Step(op=StepOp.SET_HASH, target="leaf-1", params={"l4": True})
    action = make_action(ActionKind.FIX_HASH, "leaf-1", fix)

    name, facts = actuators.apply(fix, action)
    assert (name, facts) == ("gnmi", {"previous": False})
    assert fabric.hash_l4("leaf-1")
    fabric.board.wait_tick(fabric.board.tick + 2, timeout_s=5)
    assert fabric.hash_l4("leaf-1")  # the configured hash wins over the fault

    (undo,) = inverse(fix, facts)
    assert undo == Step(op=StepOp.SET_HASH, target="leaf-1", params={"l4": False})
    assert actuators.apply(undo, action) == ("gnmi", {"previous": True})
    assert not fabric.hash_l4("leaf-1")
    assert fabric.hash_l4("leaf-0")
    assert registry.get_sample_value("fabricops_gnmi_set_steps_total",
                                     {"op": "set_hash", "outcome": "ok"}) == 2


@pytest.mark.integration
def test_a_hash_change_on_a_switch_the_target_does_not_serve_names_it(
        fabric: Fabric, make_action: ActionFactory) -> None:
    registry = CollectorRegistry()
    actuator = GnmiSetActuator(GnmiSetConfig(timeout_s=5.0),
                               {"leaf-99": fabric.target.address}, registry=registry)
    step = Step(op=StepOp.SET_HASH, target="leaf-99", params={"l4": True})
    with pytest.raises(ActuatorError, match=r"set_hash leaf-99 \(l4=True\): leaf-99 at .*"
                                            r"NOT_FOUND: target 'leaf-99' is not served"):
        actuator.apply(step, make_action(ActionKind.FIX_HASH, step.target, step))
    assert registry.get_sample_value("fabricops_gnmi_set_steps_total",
                                     {"op": "set_hash", "outcome": "refused"}) == 1


@pytest.mark.integration
def test_an_unknown_interface_is_refused_naming_the_port(
        fabric: Fabric, make_action: ActionFactory) -> None:
    registry = CollectorRegistry()
    step = Step(op=StepOp.SHUT_PORT, target="leaf-1:eth999")
    with pytest.raises(ActuatorError, match=r"shut_port leaf-1:eth999: .*NOT_FOUND.*eth999"):
        _actuator(fabric, registry).apply(step, make_action(ActionKind.ISOLATE_PORT,
                                                            step.target, step))
    assert registry.get_sample_value("fabricops_gnmi_set_steps_total",
                                     {"op": "shut_port", "outcome": "refused"}) == 1


def test_the_hash_request_updates_the_include_l4_leaf_of_the_switch() -> None:
    request = set_hash_request("leaf-1", True)
    (update,) = request.update
    assert request.prefix.target == "leaf-1"
    assert [e.name for e in update.path.elem] == ["ecmp", "hash", "config", "include-l4"]
    assert update.val.WhichOneof("value") == "bool_val"
    assert update.val.bool_val is True
    get = hash_get_request("leaf-1")
    assert get.prefix.target == "leaf-1"
    assert [e.name for e in get.path[0].elem] == ["ecmp", "hash", "state", "include-l4"]


def test_a_hash_change_needs_a_switch_not_a_port(make_action: ActionFactory) -> None:
    actuator = GnmiSetActuator(GnmiSetConfig(), {"leaf-1": "127.0.0.1:57400"})
    step = Step(op=StepOp.SET_HASH, target=PORT, params={"l4": True})
    with pytest.raises(ActuatorError, match=f"'{PORT}' is a port; set_hash needs a switch"):
        actuator.apply(step, make_action(ActionKind.FIX_HASH, step.target, step))
    unknown = Step(op=StepOp.SET_HASH, target="spine-7", params={"l4": True})
    with pytest.raises(ActuatorError, match="device 'spine-7' has no gNMI address"):
        actuator.apply(unknown, make_action(ActionKind.FIX_HASH, unknown.target, unknown))


def test_an_unreachable_target_fails_within_the_timeout(make_action: ActionFactory) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    actuator = GnmiSetActuator(GnmiSetConfig(timeout_s=2.0), {"leaf-1": address})
    step = Step(op=StepOp.SHUT_PORT, target=PORT)
    started = time.monotonic()
    with pytest.raises(ActuatorError) as err:
        actuator.apply(step, make_action(ActionKind.ISOLATE_PORT, PORT, step))
    assert time.monotonic() - started < 2.0 + 1.0
    assert f"shut_port {PORT}: leaf-1 at {address}: " in str(err.value)
    assert "unreachable" in str(err.value) or "no answer within 2 s" in str(err.value)
    assert isinstance(err.value, UnreachableError), "the engine plans again without it"
    assert err.value.device == "leaf-1"


@pytest.mark.integration
def test_a_check_asks_the_device_and_changes_nothing(fabric: Fabric) -> None:
    """A port's oper-status, the hash fields and a switch the target does not serve (it
    answers NOT_FOUND): each an answer; nothing on the fabric changes."""
    registry = CollectorRegistry()
    actuator = _actuator(fabric, registry)
    actuator.check(Step(op=StepOp.SHUT_PORT, target=PORT))
    actuator.check(Step(op=StepOp.SET_HASH, target="leaf-1", params={"l4": False}))
    other = CollectorRegistry()
    unserved = GnmiSetActuator(GnmiSetConfig(timeout_s=5.0), {"leaf-99": fabric.target.address},
                               registry=other)
    unserved.check(Step(op=StepOp.SHUT_PORT, target="leaf-99:eth1"))
    assert fabric.admin_up(PORT)
    assert fabric.hash_l4("leaf-1")
    for reg, answered in ((registry, 2), (other, 1)):
        assert reg.get_sample_value("fabricops_gnmi_set_checks_total",
                                    {"outcome": "answered"}) == answered
    assert registry.get_sample_value("fabricops_gnmi_set_steps_total",
                                     {"op": "shut_port", "outcome": "ok"}) is None


@pytest.mark.integration
def test_a_check_of_a_switch_that_is_down_says_it_does_not_answer(fabric: Fabric) -> None:
    """The target serves a switch that has no frame (down) as UNAVAILABLE."""
    fabric.driver.call(lambda sim: sim.add_fault(FaultSpec(
        type="switch_down", entity="leaf-1", start_s=sim.time_s)))
    fabric.board.wait_tick(fabric.board.tick + 2, timeout_s=5)
    registry = CollectorRegistry()
    with pytest.raises(UnreachableError, match=r"shut_port leaf-1:eth40: leaf-1 at .*"
                                               r"unreachable") as err:
        _actuator(fabric, registry).check(Step(op=StepOp.SHUT_PORT, target=PORT))
    assert err.value.device == "leaf-1"
    assert registry.get_sample_value("fabricops_gnmi_set_checks_total",
                                     {"outcome": "unreachable"}) == 1


def test_a_check_of_an_unreachable_target_fails_within_the_timeout() -> None:
    address = f"127.0.0.1:{_closed_port()}"
    actuator = GnmiSetActuator(GnmiSetConfig(timeout_s=2.0), {"leaf-1": address})
    started = time.monotonic()
    with pytest.raises(UnreachableError) as err:
        actuator.check(Step(op=StepOp.SHUT_PORT, target=PORT))
    assert time.monotonic() - started < 2.0 + 1.0
    assert err.value.device == "leaf-1"
    actuator.check(Step(op=StepOp.SHUT_PORT, target="leaf-7:eth1"))  # unknown: apply says so


def test_the_check_request_reads_the_ports_oper_status() -> None:
    request = probe_request(Step(op=StepOp.NO_SHUT_PORT, target=PORT), "leaf-1")
    assert request.prefix.target == "leaf-1"
    (path,) = request.path
    assert [e.name for e in path.elem] == ["interfaces", "interface", "state", "oper-status"]
    assert dict(path.elem[1].key) == {"name": "eth40"}
    assert probe_request(Step(op=StepOp.SET_HASH, target="leaf-1", params={"l4": True}),
                         "leaf-1") == hash_get_request("leaf-1")


def test_a_device_without_an_address_is_refused(make_action: ActionFactory) -> None:
    registry = CollectorRegistry()
    actuator = GnmiSetActuator(GnmiSetConfig(), {"leaf-1": "127.0.0.1:57400"},
                               registry=registry)
    step = Step(op=StepOp.NO_SHUT_PORT, target="spine-3:eth2")
    with pytest.raises(ActuatorError, match=r"no_shut_port spine-3:eth2: device 'spine-3' "
                                            "has no gNMI address"):
        actuator.apply(step, make_action(ActionKind.ISOLATE_PORT, step.target, step))
    assert registry.get_sample_value("fabricops_gnmi_set_steps_total",
                                     {"op": "no_shut_port", "outcome": "unknown_device"}) == 1


def test_a_target_that_is_not_a_port_is_refused(make_action: ActionFactory) -> None:
    actuator = GnmiSetActuator(GnmiSetConfig(), {"leaf-1": "127.0.0.1:57400"})
    step = Step(op=StepOp.SHUT_PORT, target="leaf-1")
    with pytest.raises(ActuatorError, match="shut_port leaf-1: port id 'leaf-1' is not"):
        actuator.apply(step, make_action(ActionKind.ISOLATE_PORT, step.target, step))


def test_a_bad_address_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="'leaf-1'"):
        GnmiSetActuator(GnmiSetConfig(), {"leaf-1": "no-port-here"})
