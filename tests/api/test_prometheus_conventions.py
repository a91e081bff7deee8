"""What a Prometheus user expects of every fabricops /metrics: promtool-clean output, one
definition per family, one label vocabulary, and a series set that does not churn."""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import fabricops
from fabricops.agent.metrics import AgentMetrics
from fabricops.api.alert_sender import AlertMetrics
from fabricops.api.fabric_metrics import FabricMetrics, FabricMetricsConfig
from fabricops.api.metrics_vocabulary import RETIRED_LABELS
from fabricops.api.platform_metrics import NewestFrameTime, PlatformMetrics, PlatformMetricsConfig
from fabricops.collectors.collection import CollectionStatus
from fabricops.collectors.gnmi import GnmiCollector, GnmiCollectorConfig
from fabricops.collectors.gnmi_config import GnmiEndpoint
from fabricops.collectors.int_receiver import IntReceiver, IntReceiverConfig
from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, SnmpTarget
from fabricops.core.bus import Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.liveness import Liveness
from fabricops.core.membus import MemoryBus
from fabricops.pipeline.worker_metrics import WorkerMetrics
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from fabricops.store.metrics import StoreMetrics
from tests.conftest import require_program

PACKAGE = Path(fabricops.__file__).parent
DEPLOY = Path(__file__).parents[2] / "deploy" / "prometheus"
METRIC_CLASSES = {"Counter", "Gauge", "Histogram", "Summary", "Info", "Enum",
                  "CounterMetricFamily", "GaugeMetricFamily", "HistogramMetricFamily"}
DEVICES = ("leaf-0", "leaf-1")


def _literal(node: ast.expr, prefixes: dict[str, str]) -> str | None:
    """The string a name argument evaluates to: a literal, or an f-string of literals
    and prefix variables (``f"{p}polls"``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
            elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name) \
                    and part.value.id in prefixes:
                parts.append(prefixes[part.value.id])
            else:
                return None
        return "".join(parts)
    return None


def _prefixes(tree: ast.Module) -> dict[str, str]:
    """Variables assigned a ``fabricops_`` prefix anywhere in the module."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = zip(target.elts, node.value.elts, strict=False) \
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                else [(target, node.value)]
            for name, value in pairs:
                if isinstance(name, ast.Name) and isinstance(value, ast.Constant) \
                        and isinstance(value.value, str) and value.value.startswith("fabricops_"):
                    out[name.id] = value.value
    return out


def defined_families() -> Iterator[tuple[str, tuple[str, ...], str]]:
    """(family name, label names, module) of every metric the package defines in code."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        prefixes = _prefixes(tree)
        module = str(path.relative_to(PACKAGE.parent))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func.attr if isinstance(node.func, ast.Attribute) else \
                node.func.id if isinstance(node.func, ast.Name) else ""
            name_at = 1 if func == "shared_counter" else 0 if func in METRIC_CLASSES else None
            if name_at is None or len(node.args) <= name_at:
                continue
            name = _literal(node.args[name_at], prefixes)
            if name is None or not name.startswith("fabricops_"):
                continue
            labels: tuple[str, ...] = ()
            label_arg = [kw.value for kw in node.keywords if kw.arg in ("labels", "labelnames")]
            label_arg += node.args[name_at + 2:name_at + 3]
            if label_arg and isinstance(label_arg[0], ast.List | ast.Tuple):
                labels = tuple(e.value for e in label_arg[0].elts
                               if isinstance(e, ast.Constant) and isinstance(e.value, str))
            yield name.removesuffix("_total"), labels, module


def test_the_scan_finds_the_families_of_every_component() -> None:
    names = {name for name, _, _ in defined_families()}
    for expected in ("fabricops_snmp_target_up", "fabricops_gnmi_target_up",
                     "fabricops_link_errors", "fabricops_switch_pfc_pauses",
                     "fabricops_pipeline_frames", "fabricops_dead_letters",
                     "fabricops_agent_read_problems", "fabricops_collector_targets_up"):
        assert expected in names


def test_no_two_modules_define_the_same_family() -> None:
    where: dict[str, set[str]] = {}
    for name, _, module in defined_families():
        where.setdefault(name, set()).add(module)
    assert {n: sorted(m) for n, m in where.items() if len(m) > 1} == {}


def test_no_family_uses_a_retired_label_name() -> None:
    bad = {(name, label): RETIRED_LABELS[label] for name, labels, _ in defined_families()
           for label in labels if label in RETIRED_LABELS}
    assert bad == {}, "use the vocabulary of fabricops.api.metrics_vocabulary"


class _Sink:
    def publish_frames(self, frames: object) -> None:
        return None

    def publish_int(self, batch: object) -> None:
        return None


class _Collection:
    def status(self) -> CollectionStatus:
        return CollectionStatus(targets_up={"snmp": (2, 2), "gnmi": (2, 2)},
                                frames={"snmp": 4}, samples={"snmp": 400}, int_reports=0,
                                int_hops=0)


def component_registries() -> dict[str, CollectorRegistry]:
    """Each component's own registry, built as its process builds it (not started)."""
    regs = {name: CollectorRegistry() for name in (
        "snmp", "gnmi", "int", "agent", "pipeline", "store", "fabric", "platform", "alerts")}
    SnmpPoller(SnmpPollerConfig(targets=tuple(SnmpTarget(device=d) for d in DEVICES)),
               _Sink(), regs["snmp"])
    GnmiCollector(GnmiCollectorConfig(targets=tuple(
        GnmiEndpoint(device=d, address=f"127.0.0.1:{57400 + i}")
        for i, d in enumerate(DEVICES))), _Sink(), regs["gnmi"])
    IntReceiver(IntReceiverConfig(), _Sink(), regs["int"])
    AgentMetrics(regs["agent"])
    AlertMetrics(regs["alerts"], ["https://receiver.example/hook"])
    WorkerMetrics(regs["pipeline"])
    StoreMetrics(regs["store"])
    FabricMetrics(FabricMetricsConfig(), MemoryBus(), fat_tree(k=4), regs["fabric"],
                  liveness=Liveness(regs["fabric"]))
    newest = NewestFrameTime()
    newest.observe([], 1)
    PlatformMetrics(PlatformMetricsConfig(), collection=_Collection(), newest_frame_ns=newest,
                    registry=regs["platform"])
    return regs


def promtool_check_metrics(text: bytes) -> subprocess.CompletedProcess[str]:
    program = require_program("promtool", "to check the exposition of /metrics")
    return subprocess.run([program, "check", "metrics"], input=text.decode(),
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("component", sorted(component_registries()))
def test_promtool_finds_nothing_to_say_about_a_components_metrics(component: str) -> None:
    text = generate_latest(component_registries()[component])
    done = promtool_check_metrics(text)
    assert done.returncode == 0, f"{done.stdout}{done.stderr}"
    assert not (done.stdout + done.stderr).strip(), "promtool has remarks"


def test_promtool_catches_a_counter_without_total() -> None:
    done = promtool_check_metrics(b"# HELP x_errors Errors\n# TYPE x_errors counter\n"
                                  b"x_errors 1\n")
    assert "_total" in done.stdout + done.stderr


def test_collectors_have_every_configured_devices_series_before_polling() -> None:
    regs = component_registries()
    for device in DEVICES:
        assert regs["snmp"].get_sample_value("fabricops_snmp_target_up", {"device": device}) == 0
        assert regs["gnmi"].get_sample_value("fabricops_gnmi_target_up", {"device": device}) == 0
        assert regs["gnmi"].get_sample_value("fabricops_gnmi_frames_total",
                                             {"device": device}) == 0


def series(registry: CollectorRegistry) -> set[str]:
    """Every sample's name and labels, as a Prometheus user sees them (``_created`` aside)."""
    text = generate_latest(registry).decode()
    out = set()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not s.name.endswith("_created"):
                out.add(s.name + "{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                        + "}")
    return out


def test_two_scrapes_ten_seconds_apart_of_a_healthy_fabric_have_the_same_series() -> None:
    topo = fat_tree(k=4)
    sim = Simulator(topo, SimConfig(seed=5))
    sim.add_job(JobSpec(hosts=16, placement="random", compute_s=0.3, comm_bytes_per_nic=30e9))
    bus = MemoryBus()
    bus.start()
    registry = CollectorRegistry()
    fabric = FabricMetrics(FabricMetricsConfig(), bus, topo, registry,
                           liveness=Liveness(registry))
    newest = NewestFrameTime()
    PlatformMetrics(PlatformMetricsConfig(), collection=_Collection(), newest_frame_ns=newest,
                    registry=registry)
    consumer = bus.subscribe([topic_name(Topic.TELEMETRY)], "test-scrapes")
    sink = BusFrameSink(bus)

    def advance(seconds: int) -> None:
        for _ in range(seconds):
            sim.step()
            frames = sim.frames()
            sink.publish_frames(frames)
            newest.observe([], max(f.ts_ns for f in frames))
        fabric.process(consumer.poll(0.0, 100_000))

    try:
        before = series(registry)
        advance(10)
        first = series(registry)
        errors_first = registry.get_sample_value("fabricops_switch_ecn_marked_packets_total",
                                                 {"device": topo.nodes[-1].id}) or 0.0
        advance(10)
        second = series(registry)
    finally:
        bus.stop()
    assert first == second, f"appeared {sorted(second - first)[:5]}, " \
                            f"gone {sorted(first - second)[:5]}"
    assert len(first) > 5 * len(topo.links)
    late = {re.sub(r"\{.*", "", s) for s in first - before}
    assert late <= {"fabricops_link_rx_power_dbm", "fabricops_pipeline_lag_seconds"}, \
        "only optical readings appear later, at a link's first report"
    assert before - first == set()
    assert errors_first >= 0.0
    assert "NaN" not in generate_latest(registry).decode()


def test_the_shipped_rules_pass_promtool_check_and_their_unit_tests() -> None:
    program = require_program("promtool", "to check the shipped recording and alerting rules")
    rules = sorted(str(p) for p in (DEPLOY / "rules").glob("*.yml"))
    assert len(rules) == 2
    check = subprocess.run([program, "check", "rules", *rules], capture_output=True,
                           text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run([program, "test", "rules", "tests/rules_test.yml"], cwd=DEPLOY,
                          capture_output=True, text=True, timeout=60, check=False)
    assert test.returncode == 0, test.stdout + test.stderr
    assert "SUCCESS" in test.stdout


def test_a_nic_counter_reset_never_makes_the_agents_extra_counter_go_back() -> None:
    registry = CollectorRegistry()
    extra = AgentMetrics(registry).nic_extra
    labels = {"port": "gpu-7:nic0", "counter": "ecn_marked_roce_packets_received"}
    for raw in (100.0, 250.0, 7.0, 9.0):
        extra.labels(labels["port"], labels["counter"]).set(raw)
    assert registry.get_sample_value("fabricops_agent_nic_extra_total", labels) == 259.0
