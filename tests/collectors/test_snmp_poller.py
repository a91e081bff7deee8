"""The SNMP poller against the simulated agent and net-snmp's snmpd: frames, health, pace."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from fabricops.collectors.snmp import (
    SnmpPoller,
    SnmpPollerConfig,
    SnmpTarget,
    targets_from_inventory,
)
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame, Source
from fabricops.core.inventory import SnmpCredentials, inventory_from_dict
from fabricops.core.records import SamplingPolicy
from fabricops.core.sinks import ListSink
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.snmp_agent import SnmpAgent, SnmpAgentConfig
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from tests.conftest import require_program

NOT_IN_SNMP = {"carrier_transitions", "ecn_marked_pkts", "queue_depth_bytes",
               "queue_watermark_bytes"}
V3 = SnmpCredentials(version="v3", user="fabricops", auth_key="fabricops-auth",
                     priv_key="fabricops-priv")


# --- against the simulated agent ------------------------------------------------------

@pytest.fixture(scope="module")
def fabric() -> Iterator[tuple[FrameBoard, SnmpAgent, Simulator]]:
    """A quiet board of 12 switches (16 ports each) behind one simulated agent."""
    sim = Simulator(leaf_spine(gpus=64, leaf_radix=16, spine_radix=16), SimConfig(seed=4))
    sim.add_job(JobSpec(hosts=8, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    for _ in range(3):
        sim.step()
    board = FrameBoard()
    board.publish(sim.frames())
    switches = [d for d in board.devices() if not d.startswith("host")]
    agent = SnmpAgent(SnmpAgentConfig(), board, switches)
    agent.start()
    yield board, agent, sim
    agent.stop()


def switch_targets(board: FrameBoard, port: int, **kw: object) -> list[SnmpTarget]:
    """v2c targets for the board's switches (a generous timeout: the agent shares our CPU)."""
    kw = {"timeout_s": 3.0, **kw}
    return [SnmpTarget(device=d, port=port, credentials=SnmpCredentials(community=d), **kw)
            for d in board.devices() if not d.startswith("host")]


def assert_frame_matches_board(frame: Frame, board: FrameBoard, device: str) -> None:
    held = board.values(device)
    assert held is not None
    assert frame.source is Source.SNMP
    names = [CATALOGUE.by_id(m).name for m in frame.metric.tolist()]
    entities = [frame.entities[i] for i in frame.entity_idx.tolist()]
    got = dict(zip(zip(entities, names, strict=True), frame.values().tolist(), strict=True))
    chassis = {m for e, m in got if e == frame.device}  # the simulated chassis sensors
    assert chassis == {"chassis_temperature_c", "fan_speed_rpm", "psu_power_w"}
    got = {k: v for k, v in got.items() if k[0] != frame.device}
    expected = {k: v for k, v in held.values.items()
                if k[1] not in NOT_IN_SNMP and k[0].startswith(f"{device}:")}
    assert got.keys() == expected.keys()
    for key, want in expected.items():
        assert got[key] == pytest.approx(want, abs=1e-3 if isinstance(want, float) else 0), key


def test_frames_equal_the_board_over_v2c_and_v3(
        fabric: tuple[FrameBoard, SnmpAgent, Simulator]) -> None:
    board, agent, _ = fabric
    targets = switch_targets(board, agent.port)
    v3 = V3.model_copy(update={"context": "spine-1"})
    targets.append(SnmpTarget(device="spine-1-v3", port=agent.port, credentials=v3,
                              timeout_s=3.0))
    sink, registry = ListSink(), CollectorRegistry()
    poller = SnmpPoller(SnmpPollerConfig(targets=tuple(targets)), sink, registry)
    poller.start(schedule=False)
    try:
        for _ in range(2):  # the first walk describes the devices, the second does not
            status = poller.collect_once()
            assert all(s.up for s in status.values()), status
    finally:
        poller.stop()
    last = {f.device: f for f in sink.frames}
    assert len(sink.frames) == 2 * len(targets)
    for target in targets[:-1]:
        assert_frame_matches_board(last[target.device], board, target.device)
    v3_frame = last["spine-1-v3"]
    assert np.array_equal(v3_frame.raw, last["spine-1"].raw)
    assert [f.seq for f in sink.frames if f.device == "leaf-0"] == [1, 2]
    value = registry.get_sample_value
    assert sum(value("fabricops_snmp_target_up", {"device": t.device}) or 0
               for t in targets) == len(targets)
    assert value("fabricops_snmp_polls_total", {"result": "ok"}) == 2 * len(targets)
    assert value("fabricops_snmp_samples_total") == sum(f.n_samples for f in sink.frames)


def test_short_bulk_answers_and_a_failing_sink(
        fabric: tuple[FrameBoard, SnmpAgent, Simulator]) -> None:
    board, _, _ = fabric
    stingy = SnmpAgent(SnmpAgentConfig(max_bulk_varbinds=7), board, ["leaf-2", "spine-0"])
    stingy.start()

    class RefusingSink(ListSink):
        def publish_frames(self, frames: Sequence[Frame]) -> None:
            if any(f.device == "spine-0" for f in frames):
                raise ConnectionError("bus is away")
            super().publish_frames(frames)

    sink, registry = RefusingSink(), CollectorRegistry()
    targets = (SnmpTarget(device="leaf-2", port=stingy.port,
                          credentials=SnmpCredentials(community="leaf-2")),
               SnmpTarget(device="spine-0", port=stingy.port,
                          credentials=SnmpCredentials(community="spine-0")))
    poller = SnmpPoller(SnmpPollerConfig(targets=targets), sink, registry)
    poller.start(schedule=False)
    try:
        status = poller.collect_once()
    finally:
        poller.stop()
        stingy.stop()
    (frame,) = sink.frames
    assert_frame_matches_board(frame, board, "leaf-2")  # rows cut short mid-row still add up
    assert status["spine-0"].up is True
    assert "sink refused the frame: bus is away" in status["spine-0"].last_error
    assert registry.get_sample_value("fabricops_snmp_errors_total", {"reason": "publish"}) == 1


def dead_port() -> int:
    """A loopback UDP port with nothing listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_target_that_never_answers_is_down_quickly_and_slows_no_one(
        fabric: tuple[FrameBoard, SnmpAgent, Simulator]) -> None:
    board, agent, _ = fabric
    live = switch_targets(board, agent.port)
    dead = SnmpTarget(device="ghost", port=dead_port(), credentials=SnmpCredentials(community="x"),
                      timeout_s=0.5, retries=1)
    sink, registry = ListSink(), CollectorRegistry()
    config = SnmpPollerConfig(targets=(dead, *live), max_in_flight=2)
    poller = SnmpPoller(config, sink, registry)
    poller.start(schedule=False)
    try:
        t0 = time.perf_counter()
        first = poller.collect_once()
        first_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        second = poller.collect_once()
        second_s = time.perf_counter() - t0
    finally:
        poller.stop()
    assert first["ghost"].up is False
    assert second["ghost"].consecutive_failures == 2
    assert "SNMP target ghost (127.0.0.1:" in first["ghost"].last_error
    assert "no answer in 2 tries of 0.5 s" in first["ghost"].last_error
    assert "no answer in 1 tries" in second["ghost"].last_error  # only probed once down
    assert all(s.up for d, s in second.items() if d != "ghost")
    assert first_s < 1.0 + 3.0  # two tries of 0.5 s, beside the live walks
    assert second_s < 0.5 + 3.0
    assert sink.devices() == {t.device for t in live}
    assert registry.get_sample_value("fabricops_snmp_timeouts_total") == 2
    assert registry.get_sample_value("fabricops_snmp_target_up", {"device": "ghost"}) == 0


def test_a_switch_that_goes_down_is_marked_down_while_the_others_keep_their_pace(
        fabric: tuple[FrameBoard, SnmpAgent, Simulator]) -> None:
    board, agent, sim = fabric
    sink = ListSink()
    targets = [t for t in switch_targets(board, agent.port, interval_s=0.25, timeout_s=0.5,
                                         retries=0) if t.device in ("leaf-0", "leaf-1", "spine-0")]
    poller = SnmpPoller(SnmpPollerConfig(targets=tuple(targets)), sink)
    frames = sim.frames()
    poller.start()
    try:
        time.sleep(0.6)
        board.publish([f for f in frames if f.device != "leaf-1"])
        down_at = time.monotonic()
        while poller.status()["leaf-1"].up is not False:
            assert time.monotonic() - down_at < 3.0
            time.sleep(0.02)
        counted = len(sink.frames)
        time.sleep(1.0)
        others = [f for f in sink.frames[counted:] if f.device == "leaf-0"]
        assert 2 <= len(others) <= 6  # one frame every 0.25 s, unaffected by leaf-1
        board.publish(frames)
        time.sleep(0.8)
        assert poller.status()["leaf-1"].up is True
    finally:
        poller.stop()
        board.publish(frames)


def test_a_sampling_policy_sets_the_pace(fabric: tuple[FrameBoard, SnmpAgent, Simulator]
                                         ) -> None:
    board, agent, _ = fabric
    sink = ListSink()
    targets = switch_targets(board, agent.port, interval_s=30.0)[:2]
    poller = SnmpPoller(SnmpPollerConfig(targets=tuple(targets)), sink)
    poller.start()
    try:
        now = time.time_ns()
        device = targets[1].device
        poller.apply_policy(SamplingPolicy(device=device, interval_s=0.1, ts_ns=now))
        poller.apply_policy(SamplingPolicy(device=device, interval_s=20, ts_ns=now - 1))
        assert poller.interval_of(device) == 0.1  # the older policy does not win
        assert poller.interval_of(targets[0].device) == 30.0
        time.sleep(1.0)
        fast = [f for f in sink.frames if f.device == device]
        assert len(fast) >= 4  # about 10
        assert sum(f.device == targets[0].device for f in sink.frames) <= 1
        poller.apply_policy(SamplingPolicy(device="*", interval_s=5, ts_ns=now,
                                           expires_ns=now + 1))
        assert poller.interval_of(targets[0].device) == 30.0  # expired
    finally:
        poller.stop()


def test_targets_come_from_the_inventory_and_incomplete_ones_are_refused() -> None:
    inventory = inventory_from_dict({
        "defaults": {"interval_s": 7},
        "targets": [{"device": "leaf-0", "protocol": "snmp", "address": "10.0.0.1:1161",
                     "snmp": {"version": "v2c", "community": "c0"}},
                    {"device": "leaf-0", "protocol": "gnmi", "address": "10.0.0.1:57400"}]})
    (target,) = targets_from_inventory(inventory)
    assert (target.host, target.port, target.interval_s) == ("10.0.0.1", 1161, 7)
    with pytest.raises(ValueError, match="SNMP target leaf-9: v3 needs user"):
        SnmpTarget(device="leaf-9", credentials=SnmpCredentials(version="v3"))
    with pytest.raises(ValueError, match="SNMP target leaf-9: v2c needs a community"):
        SnmpTarget(device="leaf-9", credentials=SnmpCredentials())
    with pytest.raises(ValueError, match="SNMP target leaf-0 is listed twice"):
        SnmpPollerConfig(targets=(target, target))


# --- against net-snmp's snmpd -----------------------------------------------------------

@pytest.fixture
def snmpd(tmp_path: Path) -> Iterator[int]:
    """A real net-snmp agent on loopback serving this machine's interfaces."""
    program = require_program("snmpd", "to poll a real SNMP agent")
    require_program("snmpget", "to read a real SNMP agent beside the poller")
    port = dead_port()
    state = tmp_path / "snmpd"
    state.mkdir()
    state.chmod(0o777)
    conf = state / "snmpd.conf"
    conf.write_text(f"agentAddress udp:127.0.0.1:{port}\nrocommunity public 127.0.0.1\n")
    cmd = [program, "-f", "-C", "-c", str(conf), "-Lf", str(state / "snmpd.log"),
           f"--persistentDir={state}"]
    if os.geteuid() == 0:
        cmd += ["-u", "nobody", "-g", "nogroup"]
    proc = subprocess.Popen(cmd, env=dict(os.environ, MIBS=""), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while snmpget_lo_octets(port, tmp_path) is None:
            assert proc.poll() is None, (state / "snmpd.log").read_text()
            assert time.monotonic() < deadline, "snmpd did not answer within 10 s"
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


LO_IF_INDEX = 1  # net-snmp numbers interfaces by kernel ifindex; lo is 1


def snmpget_lo_octets(port: int, state: Path) -> int | None:
    out = subprocess.run(
        ["snmpget", "-m", "", "-On", "-Oqv", "-t", "0.5", "-r", "0", "-v2c", "-c", "public",
         f"127.0.0.1:{port}", f"1.3.6.1.2.1.31.1.1.1.6.{LO_IF_INDEX}"],
        capture_output=True, text=True, check=False,
        env=dict(os.environ, MIBS="", SNMP_PERSISTENT_DIR=str(state)))
    text = out.stdout.strip()
    return int(text) if out.returncode == 0 and text.isdigit() else None


@pytest.mark.integration
def test_a_real_snmpd_reads_like_snmpget(snmpd: int, tmp_path: Path) -> None:
    sink = ListSink()
    target = SnmpTarget(device="this-host", port=snmpd)
    poller = SnmpPoller(SnmpPollerConfig(targets=(target,)), sink)
    poller.start(schedule=False)
    try:
        before = snmpget_lo_octets(snmpd, tmp_path)
        status = poller.collect_once()
        after = snmpget_lo_octets(snmpd, tmp_path)
    finally:
        poller.stop()
    assert status["this-host"].up, status
    (frame,) = sink.frames
    names = [CATALOGUE.by_id(m).name for m in frame.metric.tolist()]
    entities = [frame.entities[i] for i in frame.entity_idx.tolist()]
    got = dict(zip(zip(entities, names, strict=True), frame.raw.tolist(), strict=True))
    assert before is not None
    assert after is not None
    assert before <= got[("this-host:lo", "in_octets")] <= after
    assert got[("this-host:lo", "oper_status")] == 1
