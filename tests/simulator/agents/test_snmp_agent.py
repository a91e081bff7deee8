"""The simulated SNMP agent answers real net-snmp tools with the board's values."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from pyasn1.codec.ber.decoder import decode as ber_decode
from pyasn1.codec.ber.encoder import encode as ber_encode
from pyasn1.type import univ
from pysnmp.proto import rfc1902

from fabricops.collectors.snmp_pdu import GETNEXT, V2C, encode_request
from fabricops.core import snmp_entity_mib as ent
from fabricops.core import snmp_mib as mib
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.driver import DriverConfig, SimulationDriver
from fabricops.simulator.agents.snmp_agent import SnmpAgent, SnmpAgentConfig, build_device_mib
from fabricops.simulator.agents.snmp_entity_tree import transceiver_index
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from tests.conftest import require_program

V3 = ["-v3", "-l", "authPriv", "-u", "fabricops", "-a", "SHA", "-A", "fabricops-auth",
      "-x", "AES", "-X", "fabricops-priv"]
LINE = re.compile(r"^\.(?P<oid>[\d.]+) = (?:(?P<type>[\w-]+): )?(?P<value>.*)$")


def small_sim(seed: int = 2) -> Simulator:
    """12 switches of 16 ports with a job that keeps every link busy."""
    sim = Simulator(leaf_spine(gpus=64, leaf_radix=16, spine_radix=16), SimConfig(seed=seed))
    sim.add_job(JobSpec(hosts=8, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    return sim


class NetSnmp:
    """Runs net-snmp tools against the agent with numeric OIDs and no MIB files."""

    def __init__(self, port: int, state_dir: Path) -> None:
        self.target = f"127.0.0.1:{port}"
        self.env = dict(os.environ, MIBS="", SNMP_PERSISTENT_DIR=str(state_dir),
                        SNMPCONFPATH=str(state_dir))

    def run(self, tool: str, *args: str, oids: int = 1) -> subprocess.CompletedProcess[str]:
        """``tool`` with options ``args[:-oids]`` and OIDs ``args[-oids:]``."""
        cmd = [tool, "-m", "", "-On", "-t", "1", "-r", "1", *args[:-oids], self.target,
               *args[-oids:]]
        return subprocess.run(cmd, capture_output=True, text=True, env=self.env,
                              timeout=30, check=False)

    def walk(self, *args: str) -> dict[str, tuple[str, str]]:
        """OID -> (type, value) of a successful snmpbulkwalk."""
        out = self.run("snmpbulkwalk", "-Cr25", *args)
        assert out.returncode == 0, out.stderr
        rows = {}
        for line in out.stdout.splitlines():
            m = LINE.match(line)
            assert m, line
            rows[m["oid"]] = (m["type"] or "", m["value"].strip('"'))
        return rows


@pytest.fixture
def tools() -> type[NetSnmp]:
    """net-snmp's tools, or a skip (a failure under FABRICOPS_REQUIRE_PEERS=1)."""
    require_program("snmpbulkwalk", "to walk the simulated SNMP agent with net-snmp")
    require_program("snmpget", "to read single instances from the simulated SNMP agent")
    return NetSnmp


@pytest.fixture
def quiet_fabric() -> Iterator[tuple[SimulationDriver, FrameBoard, SnmpAgent]]:
    """A driver that ran 3 ticks and stopped advancing, and an agent over its board."""
    sim, board = small_sim(), FrameBoard()
    driver = SimulationDriver(sim, board, DriverConfig(speed=50.0, max_ticks=3))
    driver.start()
    board.wait_tick(2, timeout_s=10)
    agent = SnmpAgent(SnmpAgentConfig(), board, _switch_ids(board))
    agent.start()
    yield driver, board, agent
    agent.stop()
    driver.stop()


def _switch_ids(board: FrameBoard) -> list[str]:
    return [d for d in board.devices() if not d.startswith("host")]


def dotted(oid: mib.Oid) -> str:
    return ".".join(map(str, oid))


def _column(rows: dict[str, tuple[str, str]], column: mib.Column) -> dict[str, tuple[str, str]]:
    prefix = dotted(column.oid) + "."
    return {oid[len(prefix):]: v for oid, v in rows.items() if oid.startswith(prefix)}


@pytest.mark.integration
def test_v2c_and_v3_walks_read_what_the_board_holds(
        quiet_fabric: tuple[SimulationDriver, FrameBoard, SnmpAgent], tools: type[NetSnmp],
        tmp_path: Path) -> None:
    _, board, agent = quiet_fabric
    assert board.tick == 3
    snmp = tools(agent.port, tmp_path)
    frame = board.latest("leaf-1")
    values = board.values("leaf-1")
    assert frame is not None
    assert values is not None
    v2c = snmp.walk("-v2c", "-c", "leaf-1", ".1.3.6.1.2.1.31.1.1.1")
    v3 = snmp.walk(*V3, "-n", "leaf-1", ".1.3.6.1.2.1.31.1.1.1")
    assert v2c == v3
    assert len(_column(v2c, mib.IF_NAME)) == len(frame.entities) == 16
    for ifx, entity in enumerate(frame.entities, start=1):
        assert _column(v2c, mib.IF_NAME)[str(ifx)] == ("STRING", entity.split(":")[1])
        for col in (mib.IF_HC_IN_OCTETS, mib.IF_HC_OUT_OCTETS, mib.IF_HC_IN_UCAST,
                    mib.IF_HC_OUT_UCAST):
            assert _column(v2c, col)[str(ifx)] == (
                "Counter64", str(values.values[(entity, col.metric or "")]))
    assert int(_column(v2c, mib.IF_HC_IN_OCTETS)["1"][1]) > 0


@pytest.mark.integration
def test_every_table_serves_the_board_encoded_as_documented(
        quiet_fabric: tuple[SimulationDriver, FrameBoard, SnmpAgent], tools: type[NetSnmp],
        tmp_path: Path) -> None:
    _, board, agent = quiet_fabric
    rows = tools(agent.port, tmp_path).walk("-v2c", "-c", "spine-2", ".1")
    values = board.values("spine-2")
    assert values is not None
    entity = values.frame.entities[4]  # ifIndex 5
    v = values.values
    assert rows["1.3.6.1.2.1.1.5.0"] == ("STRING", "spine-2")
    assert _column(rows, mib.IF_OPER_STATUS)["5"] == ("INTEGER", "1")
    assert _column(rows, mib.IF_IN_ERRORS)["5"] == ("Counter32",
                                                    str(v[(entity, "in_errors")] % 2**32))
    assert _column(rows, mib.DOT3_FCS_ERRORS)["5"][1] == str(v[(entity, "in_fcs_errors")])
    tx, rx = v[(entity, "pfc_tx_pause{prio=3}")], v[(entity, "pfc_rx_pause{prio=3}")]
    assert _column(rows, mib.PRIO_REQUESTS)["5.3"] == ("Counter64", str(tx))
    assert _column(rows, mib.PRIO_INDICATIONS)["5.3"] == ("Counter64", str(rx))
    assert _column(rows, mib.PFC_REQUESTS)["5"] == ("Counter32", str(tx % 2**32))
    xcvr = transceiver_index(5)
    port_entity = [i for i, (_, name) in _column(rows, ent.PHY_NAME).items()
                   if name == entity.partition(":")[2]]
    assert len(port_entity) == 1
    assert _column(rows, ent.ALIAS_MAPPING)[f"{port_entity[0]}.0"] == (
        "OID", ".1.3.6.1.2.1.2.2.1.1.5")
    assert _column(rows, ent.PHY_CONTAINED_IN)[port_entity[0]][1] == str(xcvr)
    lanes = {mib.SensorKind.TEMPERATURE: [1], mib.SensorKind.TX_POWER: [111, 112, 113, 114],
             mib.SensorKind.RX_POWER: [121, 122, 123, 124]}
    for kind, offsets in lanes.items():
        enc = mib.SENSOR_ENCODING[kind]
        for offset in offsets:
            index = str(xcvr + offset)
            raw = int(_column(rows, mib.SENSOR_VALUE)[index][1])
            assert raw == mib.encode_sensor(kind, v[(entity, kind.metric)])
            assert int(_column(rows, mib.SENSOR_TYPE)[index][1]) == enc.type
            assert _column(rows, ent.PHY_CONTAINED_IN)[index][1] == str(xcvr)
            decoded = mib.decode_sensor(raw, enc.type, enc.scale, enc.precision)
            assert decoded == pytest.approx(v[(entity, kind.metric)], abs=0.01)
    classes = [int(c) for _, c in _column(rows, ent.PHY_CLASS).values()]
    assert classes.count(int(ent.PhysicalClass.FAN)) >= 1
    assert classes.count(int(ent.PhysicalClass.POWER_SUPPLY)) >= 1
    oids = [tuple(int(x) for x in oid.split(".")) for oid in rows]
    assert oids == sorted(oids)  # snmpbulkwalk also checks that OIDs increase


@pytest.mark.integration
def test_oper_status_follows_a_shut_port(tools: type[NetSnmp], tmp_path: Path) -> None:
    board = FrameBoard()
    driver = SimulationDriver(small_sim(), board, DriverConfig(speed=20.0))
    driver.start()
    agent = SnmpAgent(SnmpAgentConfig(), board, _switch_ids(board))
    agent.start()
    try:
        snmp = tools(agent.port, tmp_path)
        status = dotted(mib.instance(mib.IF_OPER_STATUS, 3))
        before = snmp.run("snmpget", "-v2c", "-c", "leaf-0", status)
        assert before.stdout.strip().endswith("INTEGER: 1"), before.stderr
        driver.call(lambda sim: sim.control.shut_port("leaf-0:eth3"))
        board.wait_tick(board.tick + 2, timeout_s=10)
        after = snmp.run("snmpget", "-v2c", "-c", "leaf-0", status)
        assert after.stdout.strip().endswith("INTEGER: 2"), after.stderr
    finally:
        agent.stop()
        driver.stop()


@pytest.mark.integration
def test_a_down_switch_and_wrong_credentials_get_no_answer(
        tools: type[NetSnmp], tmp_path: Path) -> None:
    sim, board = small_sim(), FrameBoard()
    sim.step()
    board.publish([f for f in sim.frames() if f.device != "leaf-2"])
    registry = CollectorRegistry()
    agent = SnmpAgent(SnmpAgentConfig(), board, [*_switch_ids(board), "leaf-2"], registry)
    agent.start()
    try:
        snmp = tools(agent.port, tmp_path)
        sys_name = dotted(mib.instance(mib.SYS_NAME))
        assert "leaf-3" in snmp.run("snmpget", "-v2c", "-c", "leaf-3", sys_name).stdout
        for args in (["-v2c", "-c", "leaf-2"], ["-v2c", "-c", "no-such-switch"],
                     [*V3, "-n", "leaf-2"], ["-v1", "-c", "leaf-3"]):
            out = snmp.run("snmpget", *args, sys_name)
            assert out.returncode != 0
            assert "Timeout" in out.stderr, (args, out.stderr)
        dropped = {r: registry.get_sample_value("fabricops_sim_snmp_dropped_total",
                                                {"reason": r})
                   for r in ("switch_down", "snmpv1")}
        assert dropped == {"switch_down": 4.0, "snmpv1": 2.0}  # each with one retry
    finally:
        agent.stop()


@pytest.mark.integration
def test_get_and_getnext_answer_exceptions_like_an_agent(
        tools: type[NetSnmp], tmp_path: Path) -> None:
    sim, board = small_sim(), FrameBoard()
    sim.step()
    board.publish(sim.frames())
    agent = SnmpAgent(SnmpAgentConfig(), board, _switch_ids(board))
    agent.start()
    try:
        snmp = tools(agent.port, tmp_path)
        get = snmp.run("snmpget", "-v2c", "-c", "leaf-0", "1.3.6.1.2.1.31.1.1.1.6.99",
                       "1.3.6.1.2.1.31.1.1.1.15.1", "1.3.6.1.2.1.2.2.1.8.16", oids=3).stdout
        assert "No Such Instance" in get
        assert "No Such Object" in get
        assert "INTEGER: 1" in get
        last = snmp.run("snmpgetnext", "-v2c", "-c", "leaf-0", "1.3.111.2.802.1.1.21.1.1.1.3.16")
        assert "No more variables left" in last.stdout
    finally:
        agent.stop()


def test_instances_are_sorted_and_encoded_as_ber() -> None:
    sim = small_sim()
    sim.step()
    frame = next(f for f in sim.frames() if f.device == "leaf-0")
    device = build_device_mib("leaf-0", frame)
    assert device.oids == sorted(device.oids)
    assert len(set(device.oids)) == len(device)
    for oid in ((1, 3, 6, 1, 4, 1, 9, 9, 813, 1, 2, 1, 2, 300, 3), (2, 999, 2**32 + 1)):
        assert mib.ber_oid(oid) == ber_encode(univ.ObjectIdentifier(oid))
    for value in (0, 1, 127, 128, 255, 2**31, 2**32 - 1):
        assert mib.ber_value(mib.Syntax.COUNTER32, value) == ber_encode(rfc1902.Counter32(value))
    for value in (0, 2**63, 2**64 - 1):
        assert mib.ber_value(mib.Syntax.COUNTER64, value) == ber_encode(rfc1902.Counter64(value))
    for value in (-(2**31), -129, -128, -1, 0, 127, 128, 2**31 - 1):
        encoded = mib.ber_value(mib.Syntax.INTEGER, value)
        assert ber_decode(encoded, asn1Spec=rfc1902.Integer32()) == (value, b"")
    assert mib.ber_value(mib.Syntax.INTEGER, -(2**31)) == b"\x02\x04\x80\x00\x00\x00"
    long_text = b"x" * 300
    assert mib.ber_value(mib.Syntax.OCTETS, long_text) == ber_encode(univ.OctetString(long_text))


def test_requests_arriving_as_the_agent_stops_are_dropped_quietly(
        caplog: pytest.LogCaptureFixture) -> None:
    """A request queued when the agent stops finds no engine; that says nothing (a
    stopping twin must not print tracebacks after its command's last line)."""
    sim, board = small_sim(), FrameBoard()
    sim.step()
    board.publish(sim.frames())
    request = encode_request(V2C, b"leaf-0", 1, [mib.SYS_NAME.oid], pdu=GETNEXT)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        for _ in range(5):
            agent = SnmpAgent(SnmpAgentConfig(), board, _switch_ids(board))
            agent.start()
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                for _ in range(300):
                    sock.sendto(request, ("127.0.0.1", agent.port))
                agent.stop()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
