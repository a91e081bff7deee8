"""/metrics of a running stack, checked by Prometheus's own tools.

A small simulated fabric is collected over SNMP, gNMI and INT onto a memory
bus; the pipeline stores it in SQLite, the RCA reads it, and the platform and
fabric metrics are registered with every component's metrics on one registry
served over HTTP. ``promtool check metrics`` lints what is served, and a real
``prometheus`` scrapes it every second and answers queries on it.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest, start_http_server

from fabricops.api.fabric_metrics import FabricMetrics, FabricMetricsConfig
from fabricops.api.platform_metrics import NewestFrameTime, PlatformMetrics, PlatformMetricsConfig
from fabricops.collectors.collection import Collection
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.service import PipelineService, PipelineServiceConfig
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.rca.service import RcaService, RcaServiceConfig
from fabricops.simulator.agents.int_exporter import IntExporterConfig
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from tests.conftest import require_program
from tests.integration.conftest import free_port

pytestmark = pytest.mark.integration

CONTRACT = (
    "fabricops_collector_targets", "fabricops_collector_targets_up",
    "fabricops_collector_frames_total", "fabricops_collector_samples_total",
    "fabricops_collector_int_reports_total", "fabricops_pipeline_frames_total",
    "fabricops_pipeline_events_total", "fabricops_pipeline_segments_total",
    "fabricops_pipeline_lag_seconds", "fabricops_store_size_bytes", "fabricops_store_rows",
    "fabricops_compression_ratio", "fabricops_rca_diagnoses_total",
    "fabricops_diagnoses_active", "fabricops_actions", "fabricops_link_utilization_ratio",
    "fabricops_link_errors_per_second", "fabricops_link_rx_power_dbm",
    "fabricops_switch_pfc_pauses_per_second", "fabricops_switch_ecn_marked_packets_per_second",
    "fabricops_switch_discards_per_second", "fabricops_fabric_links",
    "fabricops_fabric_series_dropped",
)
"""Contract names this stack serves (the alert outbox metrics come from the API process)."""

QUERIED = ("fabricops_link_utilization_ratio", "fabricops_collector_targets_up",
           "fabricops_store_size_bytes", "fabricops_compression_ratio")


@dataclass
class Stack:
    registry: CollectorRegistry
    fabric_metrics: FabricMetrics
    platform: PlatformMetrics
    port: int


def _wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout_s} s")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The running stack, served on a free loopback port, once segments are stored."""
    topo = leaf_spine(gpus=16, nics_per_host=4, leaf_radix=8, spine_radix=8)
    sim = Simulator(topo, SimConfig(seed=1, start_time_ns=time.time_ns() // 10**9 * 10**9))
    sim.add_job(JobSpec(hosts=4, compute_s=0.0, comm_bytes_per_nic=1e15))
    fabric = SimulatedFabric(sim, SimulatedFabricConfig(
        snmp_interval_s=1.0, gnmi_interval_s=1.0,
        int_exporter=IntExporterConfig(collector_port=free_port())))
    registry = CollectorRegistry()
    bus = MemoryBus(registry=registry)
    bus.start()
    db = tmp_path_factory.mktemp("promtool") / "fabricops.db"
    pipeline = PipelineService(PipelineServiceConfig.model_validate({
        "store": {"url": f"sqlite:///{db}"},
        "worker": {"keyframe_interval_s": 2, "close_grace_s": 1}}), bus, topo, registry)
    newest = NewestFrameTime()
    pipeline.worker.on_batch.append(newest.observe)
    rca = RcaService(RcaServiceConfig(), bus, topo, RcaModel.load(DEFAULT_MODEL),
                     registry=registry)
    fabric_metrics = FabricMetrics(FabricMetricsConfig(), bus, topo, registry)
    pipeline.start()
    fabric.start()
    collection = Collection(fabric.inventory(), bus, registry=registry)
    platform = PlatformMetrics(PlatformMetricsConfig(cache_s=1.0), pipeline.store,
                               collection=collection, newest_frame_ns=newest, registry=registry)
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    for component in (rca, fabric_metrics, collection, platform):
        component.start()
    try:
        _wait_for(lambda: all(registry.get_sample_value(name) for name in (
            "fabricops_compression_ratio", "fabricops_pipeline_segments_total")) and
            b"fabricops_link_utilization_ratio{" in generate_latest(registry), 30.0,
            "no segment stored or no link rated")
        yield Stack(registry, fabric_metrics, platform, port)
    finally:
        server.shutdown()
        server.server_close()
        for running in (platform, collection, fabric, fabric_metrics, rca, pipeline):
            running.stop()
        bus.stop()


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text: str = answer.read().decode()
    return text


def _lint(promtool: str, text: str) -> tuple[int, list[str]]:
    done = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                          capture_output=True, timeout=30, check=False)
    lines = (done.stdout + done.stderr).decode().splitlines()
    return done.returncode, [line for line in lines if line.strip()]


def test_promtool_accepts_the_served_metrics(stack: Stack) -> None:
    promtool = require_program("promtool", "to lint the /metrics text")
    text = _scrape(stack.port)
    missing = [n for n in CONTRACT if not re.search(rf"^{n}[{{ ]", text, re.MULTILINE)]
    assert not missing, f"contract metrics not served: {missing}"
    own = CollectorRegistry()
    own.register(stack.fabric_metrics.collector)
    own.register(stack.platform.collector)
    code, problems = _lint(promtool, generate_latest(own).decode())
    assert (code, problems) == (0, []), "the platform and fabric metrics lint clean"
    assert _lint(promtool, text) == (0, []), "the whole process's metrics lint clean"


def _query(api: str, expr: str) -> list[dict[str, Any]]:
    url = f"{api}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=5) as answer:
        body = json.load(answer)
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@pytest.fixture
def prometheus_api(stack: Stack, tmp_path: Path) -> Iterator[str]:
    """A Prometheus scraping the stack every second; its HTTP API's base URL."""
    program = require_program("prometheus", "to scrape /metrics")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - {{job_name: fabricops, static_configs: [{{targets: ['127.0.0.1:{stack.port}']}}]}}\n")
    port = free_port()
    log = tmp_path / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [program, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=out, stderr=subprocess.STDOUT)
    api = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"prometheus exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"{api}/-/ready", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    try:
        _wait_for(ready, 20.0, "prometheus was not ready")
        yield api
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_prometheus_scrapes_and_answers_queries(prometheus_api: str) -> None:
    results = {name: _wait_for(partial(_query, prometheus_api, name), 20.0,
                               f"prometheus had no {name}") for name in QUERIED}
    utilization = [float(r["value"][1]) for r in results["fabricops_link_utilization_ratio"]]
    assert all(0.0 <= u <= 1.0 for u in utilization), utilization
    assert {r["metric"]["protocol"] for r in results["fabricops_collector_targets_up"]} >= \
        {"snmp", "gnmi"}
    assert float(results["fabricops_compression_ratio"][0]["value"][1]) > 1.0
    health = _query(prometheus_api, 'up{job="fabricops"}')
    assert [r["value"][1] for r in health] == ["1"]
