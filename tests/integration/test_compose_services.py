"""The docker-compose services, every fabricops one run as it would run in its container.

Each runs with the file's own command and environment, against a real
Kafka-protocol broker and a real PostgreSQL, host names and fixed ports
mapped to this machine's loopback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from sqlalchemy import create_engine, inspect

from fabricops.core.bus import Topic, topic_name
from fabricops.core.frame import Frame
from fabricops.core.topology import load_topology
from fabricops.store.database import parse_url
from tests.integration.compose_file import Loopback, Service, _option, fabricops_services
from tests.integration.conftest import TansuBroker, free_port

STARTUP_TIMEOUT_S = 45.0
MIN_ALIVE_S = 5.0
STOP_TIMEOUT_S = 10.0
"""Docker's default grace before it kills a container."""


@dataclass
class Running:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    stop_signal: signal.Signals

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def assert_alive(self) -> None:
        assert self.proc.poll() is None, (
            f"{self.name} exited with {self.proc.returncode}:\n{self.output()}")


def _loopback(compose: Mapping[str, Any], bootstrap_port: int, db_url: str, shared: Path,
              compose_db_url: str) -> Loopback:
    local = dict.fromkeys(compose["services"], "127.0.0.1") | {"0.0.0.0": "127.0.0.1"}
    return Loopback(hosts=local, listen_hosts={"0.0.0.0": "127.0.0.1", "sim": "127.0.0.1"},
                    ports={9092: bootstrap_port}, paths={"/shared": str(shared)},
                    values={compose_db_url: db_url}, allocate=free_port)


def _start(service: Service, loopback: Loopback, workdir: Path) -> Running:
    """Run the service's command with its environment, as the image's entrypoint would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABRICOPS_")}
    env |= loopback.environment(service.environment)
    log = workdir / f"{service.name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fabricops.cli.main", *loopback.args(service.command)],
            env=env, cwd=workdir, stdout=out, stderr=subprocess.STDOUT)
    stop = signal.Signals[service.spec.get("stop_signal", "SIGTERM")]
    return Running(service.name, proc, log, stop)


def _healthy(service: Service, loopback: Loopback) -> subprocess.CompletedProcess[str]:
    words = loopback.words(service.healthcheck)
    if words[0] == "python":
        words[0] = sys.executable
    return subprocess.run(words, capture_output=True, text=True, timeout=10, check=False)


def _http(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return 0, ""


def _serves_metrics(port: int) -> bool:
    return "fabricops_" in _http(port, "/metrics")[1]


def _wait(running: list[Running], check: Callable[[], bool], what: str,
          timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        for r in running:
            r.assert_alive()
        assert time.monotonic() < deadline, f"{what} within {timeout_s} s"
        time.sleep(0.3)


class TopicReader:
    """Reads a topic from its start, without a consumer group."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                      enable_auto_commit=False, auto_offset_reset="earliest")

    def read(self) -> list[bytes]:
        """The values published since the last read (none while the topic is missing)."""
        if not self.consumer.assignment():
            partitions = self.consumer.partitions_for_topic(self.topic)
            if not partitions:
                return []
            self.consumer.assign([TopicPartition(self.topic, p) for p in partitions])
            self.consumer.seek_to_beginning()
        return [r.value for records in self.consumer.poll(timeout_ms=500).values()
                for r in records]

    def close(self) -> None:
        self.consumer.close()


def _check_serving(ours: Mapping[str, Service], loopback: Loopback,
                   running: list[Running]) -> None:
    """The API is ready and passes its healthcheck; every metrics port serves."""
    api_port = loopback.port(int(_option(ours["api"], "--port")))
    _wait(running, lambda: _http(api_port, "/ready")[0] == 200, "api /ready answering 200")
    for name in ("pipeline", "rca", "remediation"):
        port = loopback.port(int(_option(ours[name], "--metrics-port")))
        _wait(running, partial(_serves_metrics, port), f"{name} serving /metrics")
    assert _serves_metrics(api_port)
    assert _healthy(ours["api"], loopback).returncode == 0


def _check_published(bootstrap: str, topology: Path, running: list[Running]) -> None:
    """The collector publishes SNMP and gNMI frames of the fabric's devices, and INT
    reports, on Kafka."""
    devices = set(load_topology(topology).node_by_id)
    telemetry, int_reports = (TopicReader(bootstrap, topic_name(t))
                              for t in (Topic.TELEMETRY, Topic.INT))
    sources: set[str] = set()
    reports: list[bytes] = []

    def published() -> bool:
        frames = [Frame.decode(value) for value in telemetry.read()]
        sources.update(str(f.source) for f in frames if f.device in devices)
        reports.extend(int_reports.read())
        return {"snmp", "gnmi"} <= sources and bool(reports)

    try:
        _wait(running, published, "SNMP and gNMI frames and INT reports on Kafka")
    finally:
        telemetry.close()
        int_reports.close()


def _stop(running: list[Running]) -> dict[str, int | None]:
    """Send each its compose stop signal; exit codes (None: killed after the grace)."""
    for r in running:
        if r.proc.poll() is None:
            r.proc.send_signal(r.stop_signal)
    codes: dict[str, int | None] = {}
    for r in running:
        try:
            codes[r.name] = r.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            r.proc.kill()
            r.proc.wait()
            codes[r.name] = None
    return codes


@pytest.mark.integration
def test_services_start_serve_and_stop_as_compose_runs_them(
        compose: dict[str, Any], restartable_kafka_broker: TansuBroker, postgresql_url: str,
        tmp_path: Path) -> None:
    ours = fabricops_services(compose)
    shared = tmp_path / "shared"
    shared.mkdir()
    loopback = _loopback(compose, restartable_kafka_broker.port, postgresql_url, shared,
                         ours["api"].environment["FABRICOPS_STORE__URL"])
    running: list[Running] = []
    try:
        running.append(_start(ours["sim"], loopback, tmp_path))
        files = [shared / f for f in ("topology.json", "jobs.yaml", "inventory.yaml")]
        _wait(running, lambda: all(f.exists() for f in files), "the sim's files")
        _wait(running, lambda: _healthy(ours["sim"], loopback).returncode == 0,
              "the sim's healthcheck passing")
        running += [_start(ours[name], loopback, tmp_path)
                    for name in ("collector", "pipeline", "rca", "remediation", "api")]
        started = time.monotonic()
        _check_serving(ours, loopback, running)
        _check_published(restartable_kafka_broker.bootstrap, files[0], running)
        engine = create_engine(parse_url(postgresql_url))
        tables = set(inspect(engine).get_table_names())
        engine.dispose()
        assert {"series", "segments", "diagnoses", "actions"} <= tables
        time.sleep(max(0.0, started + MIN_ALIVE_S - time.monotonic()))
        for r in running:
            r.assert_alive()
    finally:
        codes = _stop(running)
    failed = {r.name: r.output() for r in running if codes[r.name] != 0}
    assert not failed, f"not stopped cleanly within {STOP_TIMEOUT_S} s (exit {codes}): {failed}"
