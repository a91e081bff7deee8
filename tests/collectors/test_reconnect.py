"""Collectors and devices that go away: answers are taken only from the device asked,
a device that is back is polled or streaming again within seconds, and an outage
is two log lines, not one per attempt."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from fabricops.collectors.gnmi import GnmiCollector
from fabricops.collectors.gnmi_config import GnmiCollectorConfig, GnmiEndpoint
from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, SnmpTarget
from fabricops.core.inventory import SnmpCredentials
from fabricops.core.sinks import ListSink
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.snmp_agent import SnmpAgent, SnmpAgentConfig
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec

from .gnmi_fabric import Fabric, serving


class Relay:
    """A UDP relay in front of an SNMP agent. ``mode``: ``same`` answers from the port
    asked, ``other`` from another port (as a stray or spoofed answer would), ``drop``
    answers nothing (the device is down)."""

    def __init__(self, agent_port: int) -> None:
        self.agent = ("127.0.0.1", agent_port)
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.side = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.side.bind(("127.0.0.1", 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.settimeout(5)
        self.port = self.front.getsockname()[1]
        self.mode = "same"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.front.settimeout(0.1)
        while not self._stop.is_set():
            try:
                request, client = self.front.recvfrom(65535)
            except TimeoutError:
                continue
            if self.mode == "drop":
                continue
            self.back.sendto(request, self.agent)
            try:
                answer = self.back.recv(65535)
            except TimeoutError:
                continue
            (self.front if self.mode == "same" else self.side).sendto(answer, client)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for s in (self.front, self.side, self.back):
            s.close()


@pytest.fixture(scope="module")
def agent() -> Iterator[SnmpAgent]:
    sim = Simulator(leaf_spine(gpus=64, leaf_radix=16, spine_radix=16), SimConfig(seed=4))
    sim.add_job(JobSpec(hosts=8, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    sim.step()
    board = FrameBoard()
    board.publish(sim.frames())
    snmp = SnmpAgent(SnmpAgentConfig(), board, ["leaf-0"])
    snmp.start()
    yield snmp
    snmp.stop()


@pytest.fixture
def relay(agent: SnmpAgent) -> Iterator[Relay]:
    r = Relay(agent.port)
    yield r
    r.close()


def _target(relay: Relay, **kw: object) -> SnmpTarget:
    return SnmpTarget(port=relay.port, credentials=SnmpCredentials(community="leaf-0"),
                      **{"device": "leaf-0", "timeout_s": 1.0, "retries": 0,
                         **kw})  # type: ignore[arg-type]


def test_an_answer_from_another_address_is_ignored_counted_and_logged_once(
    relay: Relay, caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()
    poller = SnmpPoller(SnmpPollerConfig(targets=(_target(relay),)), ListSink(), registry)
    poller.start(schedule=False)
    with caplog.at_level(logging.WARNING, logger="fabricops.collectors.snmp"):
        try:
            relay.mode = "other"
            spoofed = [poller.collect_once()["leaf-0"] for _ in range(3)]
            relay.mode = "same"
            real = poller.collect_once()["leaf-0"]
        finally:
            poller.stop()
    assert [s.up for s in spoofed] == [False] * 3, "the right request-id from the wrong port"
    assert real.up is True
    assert registry.get_sample_value("fabricops_snmp_errors_total",
                                     {"reason": "foreign_datagram"}) == 3
    lines = [r.getMessage() for r in caplog.records if r.name == "fabricops.collectors.snmp"]
    ignored = [line for line in lines if "ignored" in line]
    assert len(ignored) == 1, lines
    assert f"to a request sent to 127.0.0.1:{relay.port} ignored" in ignored[0]
    assert any("SNMP answers from elsewhere than asked: 2 more held back" in line
               for line in lines), lines


def _wait(done: Callable[[], bool], timeout_s: float) -> float:
    start = time.monotonic()
    while not done():
        assert time.monotonic() - start < timeout_s, "not in time"
        time.sleep(0.02)
    return time.monotonic() - start


def test_a_switch_back_is_polled_again_long_before_its_interval(
    relay: Relay, caplog: pytest.LogCaptureFixture,
) -> None:
    sink = ListSink()
    target = _target(relay, interval_s=60.0)
    poller = SnmpPoller(SnmpPollerConfig(targets=(target,), down_probe_interval_s=0.5), sink)
    with caplog.at_level(logging.WARNING, logger="fabricops.collectors.snmp"):
        relay.mode = "drop"  # down from the start
        poller.start()
        try:
            _wait(lambda: poller.status()["leaf-0"].up is False, 30)
            time.sleep(2.0)  # several probes fail meanwhile
            relay.mode = "same"
            _wait(lambda: len(sink.frames) >= 1, 30)  # not after the 60 s interval
        finally:
            poller.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "fabricops.collectors.snmp"]
    assert sum("unavailable" in line for line in lines) == 1, lines
    assert sum("back after" in line for line in lines) == 1, lines


def test_the_gnmi_backoff_is_capped_at_5_s_and_jittered() -> None:
    backoff = GnmiCollectorConfig().backoff
    assert (backoff.initial_s, backoff.max_s, backoff.jitter) == (0.5, 5.0, 0.2)
    with pytest.raises(ValidationError, match="less than or equal to 5"):
        GnmiCollectorConfig(backoff_max_s=30)
    with pytest.raises(ValidationError, match="above backoff_max_s"):
        GnmiCollectorConfig(backoff_initial_s=2, backoff_max_s=1)


def test_a_gnmi_target_back_after_an_outage_streams_again_and_is_logged_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with serving() as fabric:
        _gnmi_outage(fabric, caplog)


def _gnmi_outage(fabric: Fabric, caplog: pytest.LogCaptureFixture) -> None:
    endpoint = GnmiEndpoint(device="leaf-1", address=fabric.target.address, sample_interval_s=1)
    sink = ListSink()
    config = GnmiCollectorConfig(targets=(endpoint,), backoff_initial_s=0.1, backoff_max_s=0.5)
    collector = GnmiCollector(config, sink, registry=CollectorRegistry())
    with caplog.at_level(logging.WARNING, logger="fabricops.collectors.gnmi"):
        collector.start()
        try:
            _wait(lambda: len(sink.frames) >= 2, 30)
            fabric.target.stop()
            _wait(lambda: not collector.status()["leaf-1"].up, 30)
            time.sleep(3.0)  # long enough for the backoff to reach its cap
            before = len(sink.frames)
            fabric.target.start()  # same port
            _wait(lambda: len(sink.frames) > before, 30)
            retries = collector.status()["leaf-1"].reconnects
        finally:
            collector.stop()
    assert retries >= 3, "retried through the outage, not given up"
    lines = [r.getMessage() for r in caplog.records if r.name == "fabricops.collectors.gnmi"]
    assert sum("unavailable" in line for line in lines) == 1, lines
    assert sum("back after" in line for line in lines) == 1, lines


def _lines_until(collector: SnmpPoller | GnmiCollector, down: Callable[[], bool],
                 caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    """Run ``collector`` until ``down()``; what ``logger`` said meanwhile and as it stopped."""
    with caplog.at_level(logging.WARNING, logger=logger):
        collector.start()
        try:
            _wait(down, 30)
        finally:
            collector.stop()
    return [r.getMessage() for r in caplog.records if r.name == logger]


def test_forty_snmp_targets_down_at_once_make_six_lines(
    relay: Relay, caplog: pytest.LogCaptureFixture,
) -> None:
    """A pod's switches lost together: five lines as they come, one for the rest."""
    relay.mode = "drop"
    targets = tuple(_target(relay, device=f"leaf-{n}") for n in range(40))
    poller = SnmpPoller(SnmpPollerConfig(targets=targets, down_probe_interval_s=0.5),
                        ListSink())
    lines = _lines_until(
        poller, lambda: not any(s.up or s.polls == 0 for s in poller.status().values()),
        caplog, "fabricops.collectors.snmp")
    assert sum(" unavailable: " in line for line in lines) == 5, lines
    [summary] = [line for line in lines if line.startswith("SNMP targets: ")]
    assert summary.startswith("SNMP targets: 35 more unavailable in the last 10 s (leaf-")
    assert summary.endswith(" and 32 more)")


def test_twelve_gnmi_targets_refused_at_once_make_six_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"  # nothing listens there
    endpoints = tuple(GnmiEndpoint(device=f"spine-{n}", address=address) for n in range(12))
    collector = GnmiCollector(GnmiCollectorConfig(targets=endpoints), ListSink(),
                              registry=CollectorRegistry())
    lines = _lines_until(collector, lambda: all(s.last_error for s in collector.status().values()),
                         caplog, "fabricops.collectors.gnmi")
    assert sum(" unavailable: " in line for line in lines) == 5, lines
    [summary] = [line for line in lines if line.startswith("gNMI targets: ")]
    assert summary.startswith("gNMI targets: 7 more unavailable in the last 10 s (spine-")
