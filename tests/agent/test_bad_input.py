"""Broken NIC files never stop the agent: each is counted by reason and left out.

Every input the agent reads gets a garbage, a truncated and an out-of-range
case: counter files, operstate, RDMA port state, ``ethtool -S`` and
``ethtool -m`` recordings, and lldpd's JSON.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.agent.config import AgentConfig
from fabricops.agent.discovery import NoRdmaDevicesError
from fabricops.agent.ethtool_text import parse_module, parse_statistics
from fabricops.agent.lldp import parse_neighbours
from fabricops.agent.service import HostAgent
from fabricops.agent.values import (
    Reason,
    parse_counter,
    parse_ib_rate,
    parse_ib_state,
    parse_operstate,
    parse_speed,
)
from fabricops.core.records import SamplingPolicy
from tests.agent.conftest import ListSink

HW0 = "sys/class/infiniband/mlx5_0/ports/1/hw_counters"
STATS0 = "ethtool/ens1f0np0/statistics"


def run_once(root: Path) -> tuple[dict[tuple[str, str], int | float], CollectorRegistry]:
    registry = CollectorRegistry()
    a = HostAgent(AgentConfig(root=root, host="gpu-7"), ListSink(), registry)
    a.discover()
    frame = a.collect(ts_ns=1)
    assert frame is not None
    got = {(s["entity"], s["metric"]): s["value"] for s in frame.to_json_dict()["samples"]}
    return got, registry


def problems(registry: CollectorRegistry, reason: str) -> float:
    return registry.get_sample_value("fabricops_agent_read_problems_total",
                                     {"reason": reason}) or 0.0


@pytest.mark.parametrize(("text", "reason"), [
    ("12ab\n", "garbage"),
    ("", "truncated"),
    ("1234", "truncated"),
    (f"{2**64}\n", "out_of_range"),
    ("-5\n", "out_of_range"),
])
def test_a_bad_counter_file_is_counted_and_the_rest_published(
        tree: Path, text: str, reason: str) -> None:
    (tree / HW0 / "np_cnp_sent").write_text(text)
    got, registry = run_once(tree)
    assert ("gpu-7:nic0", "cnp_sent") not in got
    assert got[("gpu-7:nic0", "cnp_handled")] == 43000
    assert got[("gpu-7:nic1", "cnp_sent")] == 43000
    assert problems(registry, reason) == 1


def test_a_counter_file_that_vanishes_is_missing(tree: Path) -> None:
    registry = CollectorRegistry()
    a = HostAgent(AgentConfig(root=tree, host="gpu-7"), ListSink(), registry)
    a.discover()
    (tree / HW0 / "packet_seq_err").unlink()
    frame = a.collect(ts_ns=1)
    assert frame is not None
    assert ("gpu-7:nic0", "rdma_retransmits") not in {
        (s["entity"], s["metric"]) for s in frame.to_json_dict()["samples"]}
    assert problems(registry, "missing") == 1


@pytest.mark.parametrize(("text", "reason", "lost"), [
    ("NIC statistics:\n     rx_prio3_pause: 12x\n     tx_prio3_pause: 7\n", "garbage",
     "pfc_rx_pause{prio=3}"),
    ("NIC statistics:\n     tx_prio3_pause: 7\n     rx_prio3_pause: 12", "truncated",
     "pfc_rx_pause{prio=3}"),
    (f"NIC statistics:\n     tx_prio3_pause: 7\n     rx_prio3_pause: {2**64}\n",
     "out_of_range", "pfc_rx_pause{prio=3}"),
    ("garbage all the way\n", "garbage", "pfc_tx_pause{prio=3}"),
])
def test_a_bad_ethtool_listing_is_counted(tree: Path, text: str, reason: str,
                                          lost: str) -> None:
    (tree / STATS0).write_text(text)
    got, registry = run_once(tree)
    assert ("gpu-7:nic0", lost) not in got
    assert ("gpu-7:nic1", lost) in got
    assert problems(registry, reason) >= 1
    assert got[("gpu-7:nic0", "cnp_sent")] == 42000  # sysfs still read


@pytest.mark.parametrize(("text", "reason"), [
    ("upp\n", "garbage"), ("up", "truncated"), ("", "truncated")])
def test_a_bad_operstate_is_counted(tree: Path, text: str, reason: str) -> None:
    (tree / "sys/class/net/ens1f0np0/operstate").write_text(text)
    got, registry = run_once(tree)
    assert ("gpu-7:nic0", "oper_status") not in got
    assert problems(registry, reason) == 1


def test_an_optic_reading_out_of_range_is_counted(tree: Path) -> None:
    module = tree / "ethtool/ens1f0np0/module"
    module.write_text("\tModule temperature : 900.00 degrees C\n"
                      "\tRcvr signal avg optical power(Channel 1) : 0.5 mW / -3.01 dBm\n")
    got, registry = run_once(tree)
    assert ("gpu-7:nic0", "temperature_c") not in got
    assert got[("gpu-7:nic0", "rx_power_dbm")] == -3.01
    assert problems(registry, "out_of_range") == 1


def test_module_text_garbage_and_truncation() -> None:
    bad = parse_module("\tModule temperature : hot\n\tTx power (Channel 1) : bright\n", "m")
    assert [p.reason for p in bad.problems] == [Reason.GARBAGE, Reason.GARBAGE]
    cut = parse_module("\tModule temperature : 40.0 degrees C\n\tRx power (Chan", "m")
    assert cut.temperature_c == 40.0
    assert cut.rx_power_dbm is None


def test_counter_parsing() -> None:
    assert parse_counter("18446744073709551615\n", "f") == 2**64 - 1
    assert parse_counter(None, "f").reason is Reason.MISSING  # type: ignore[union-attr]
    assert parse_counter("1 2\n", "f").reason is Reason.GARBAGE  # type: ignore[union-attr]


def test_link_state_and_rate_parsing() -> None:
    assert parse_operstate("lowerlayerdown\n", "f") == 7
    assert parse_ib_state("4: ACTIVE\n", "f") == 1
    assert parse_ib_state("1: DOWN\n", "f") == 2
    assert parse_ib_state("9: WHAT\n", "f").reason is Reason.OUT_OF_RANGE  # type: ignore[union-attr]
    assert parse_ib_state("ACTIVE\n", "f").reason is Reason.GARBAGE  # type: ignore[union-attr]
    assert parse_ib_rate("400 Gb/sec (4X NDR)\n", "f") == 400e9
    assert parse_ib_rate("0 Gb/sec\n", "f").reason is Reason.OUT_OF_RANGE  # type: ignore[union-attr]
    assert parse_ib_rate("400 Gb/s", "f").reason is Reason.TRUNCATED  # type: ignore[union-attr]
    assert parse_speed("-1\n", "f") is None
    assert parse_speed("400000\n", "f") == 400e9
    assert parse_speed("99999999999\n", "f").reason is Reason.OUT_OF_RANGE  # type: ignore[union-attr]


def test_ethtool_statistics_keep_queue_prefixed_names() -> None:
    s = parse_statistics("NIC statistics:\n     [0]: rx_ucast_packets: 10\n", "e")
    assert s.values == {"[0]: rx_ucast_packets": 10}
    assert not s.problems
    assert parse_statistics("", "e").problems[0].reason is Reason.TRUNCATED


@pytest.mark.parametrize(("text", "reason"), [
    ('{"lldp": {"interface": 3}}\n', None),
    ("[1, 2]\n", "garbage"),
    ('{"lldp": {"interface": [{"eth0": {"chassis"', "truncated"),
    ('{"lldp": {"interface": {"eth0": {"chassis": {}, "port": {}}}}}\n', "garbage"),
])
def test_lldp_json_garbage_and_truncation(text: str, reason: str | None) -> None:
    found, problems_ = parse_neighbours(text, "lldp")
    assert found == {}
    assert [p.reason.value for p in problems_] == ([reason] if reason else [])


def test_a_broken_lldp_file_only_loses_the_names(tree: Path) -> None:
    (tree / "lldp/neighbors.json").write_text('{"lldp": ')
    got, registry = run_once(tree)
    assert got[("gpu-7:nic0", "cnp_sent")] == 42000
    assert problems(registry, "truncated") == 1


def test_a_counter_that_goes_back_is_a_reset(tree: Path) -> None:
    registry = CollectorRegistry()
    sink = ListSink()
    a = HostAgent(AgentConfig(root=tree, host="gpu-7"), sink, registry)
    a.discover()
    a.collect(ts_ns=1_000_000_000)
    (tree / HW0 / "np_cnp_sent").write_text("3\n")
    a.collect(ts_ns=2_000_000_000)
    assert registry.get_sample_value("fabricops_agent_device_resets_total") == 1
    last = {(s["entity"], s["metric"]): s["value"]
            for s in sink.frames[-1].to_json_dict()["samples"]}
    assert last[("gpu-7:nic0", "cnp_sent")] == 3
    assert last[("gpu-7:nic0", "rdma_tx_rate_bps")] == 0.0
    assert [f.seq for f in sink.frames] == [1, 2]


def test_no_rdma_devices_is_a_clear_error(tmp_path: Path) -> None:
    a = HostAgent(AgentConfig(root=tmp_path, host="gpu-7"), ListSink())
    with pytest.raises(NoRdmaDevicesError, match="no RDMA devices found under"):
        a.start()


class WakingSink(ListSink):
    def __init__(self, want: int) -> None:
        super().__init__()
        self.want = want
        self.done = threading.Event()

    def publish_frames(self, frames: object) -> None:
        super().publish_frames(frames)  # type: ignore[arg-type]
        if len(self.frames) >= self.want:
            self.done.set()


def test_the_loop_goes_on_through_garbage_and_follows_policy(tree: Path) -> None:
    (tree / HW0 / "np_cnp_sent").write_text("nonsense\n")
    sink, registry = WakingSink(3), CollectorRegistry()
    a = HostAgent(AgentConfig(root=tree, host="gpu-7", interval_s=3600), sink, registry)
    a.apply_policy(SamplingPolicy(device="gpu-7", interval_s=0.01, ts_ns=1))
    a.apply_policy(SamplingPolicy(device="other", interval_s=99, ts_ns=2))
    assert a.interval_s() == 0.01
    a.start()
    try:
        assert sink.done.wait(30), "the loop stopped"
    finally:
        a.stop()
    assert problems(registry, "garbage") >= 3
