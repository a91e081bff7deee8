"""``fabricops up`` and ``fabricops collect``: the stack, and collectors on their own."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from prometheus_client import CollectorRegistry, start_http_server
from rich.console import Console
from rich.live import Live
from rich.text import Text

from fabricops.api.alerts import AlertDispatcher
from fabricops.api.platform_metrics import PlatformMetrics, PlatformMetricsConfig
from fabricops.api.stack_metrics import StackMetrics
from fabricops.cli.common import fail, stderr_console, stderr_is_terminal, user_errors
from fabricops.cli.serve_common import MetricsPort, open_bus, run_until_stopped
from fabricops.cli.sim import choose_scenario
from fabricops.cli.up_analysis import ACTUATORS, start_analysis
from fabricops.cli.up_api import alerts_config, start_api
from fabricops.cli.up_api import api_token as make_token
from fabricops.collectors.collection import PROTOCOLS, Collection, CollectionStatus
from fabricops.core.actions import ActionMode
from fabricops.core.inventory import load_inventory
from fabricops.pipeline.service import PipelineService, PipelineServiceConfig, PipelineStatus
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.scenario import Scenario, build_simulator

BusKind = Annotated[str, typer.Option("--bus", help="memory (in-process) or kafka")]
Bootstrap = Annotated[str, typer.Option(
    "--bootstrap", "-b", envvar="FABRICOPS_BUS__BOOTSTRAP_SERVERS",
    help="Kafka bootstrap servers, with --bus kafka")]
Seconds = Annotated[float, typer.Option(
    "--duration", min=0, help="Stop after this many wall seconds (0: run until Ctrl-C)")]


def _status_line(status: CollectionStatus, sim_s: float | None, wall_s: float,
                 pipeline: PipelineStatus | None = None, analysis: str = "") -> Text:
    parts = [f"{wall_s:6.0f}s"]
    if sim_s is not None:
        parts.append(f"fabric t={sim_s:,.0f}s")
    for proto, (up, total) in status.targets_up.items():
        if proto == "int":
            continue
        frames = status.frames.get(proto, 0)
        parts.append(f"{proto} {up}/{total} up {frames:,} frames")
    parts.append(f"int {status.int_reports:,} reports")
    samples = sum(status.samples.values())
    parts.append(f"{samples:,} samples published")
    if pipeline is not None:
        parts.append(f"pipeline {pipeline.frames:,} frames {pipeline.segments:,} segments "
                     f"{pipeline.events:,} events {pipeline.hot_devices} sampled fast")
    if analysis:
        parts.append(analysis)
    return Text("  |  ".join(parts))


def _watch(collection: Collection, fabric: SimulatedFabric | None, duration: float,
           console: Console, pipeline: PipelineService | None = None,
           analysis: Callable[[], str] | None = None) -> tuple[CollectionStatus, float]:
    """Show a live status line (on a terminal) until ``duration`` passes, Ctrl-C or
    SIGTERM; return the collectors' last status and the wall seconds it ran."""
    started = time.monotonic()
    live = Live(console=console, auto_refresh=False) if stderr_is_terminal() else None

    def show(wall: float) -> None:
        if live is not None:
            sim_s = fabric.sim.time_s if fabric is not None else None
            piped = pipeline.status() if pipeline is not None else None
            said = analysis() if analysis is not None else ""
            live.update(_status_line(collection.status(), sim_s, wall, piped, said),
                        refresh=True)

    if live is not None:
        live.start()
    try:
        run_until_stopped(duration, [], show)
    finally:
        if live is not None:
            live.stop()
    return collection.status(), time.monotonic() - started


def up(
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML for the simulated fabric (default: the demo preset)")] = None,
    preset: Annotated[str | None, typer.Option("--preset", "-p", help="A shipped scenario")]
    = None,
    speed: Annotated[float, typer.Option(min=0.01, help="Simulated seconds per wall second")]
    = 1.0,
    duration: Seconds = 0.0,
    bus_kind: BusKind = "memory",
    bootstrap: Bootstrap = "127.0.0.1:9092",
    snmp_interval: Annotated[float, typer.Option(min=0.1, help="SNMP poll interval, s")] = 10.0,
    gnmi_interval: Annotated[float, typer.Option(min=0.1, help="gNMI sample interval, s")]
    = 1.0,
    db: Annotated[str, typer.Option("--db", envvar="FABRICOPS_STORE__URL",
                                    help="Store URL (SQLite file or PostgreSQL)")]
    = "sqlite:///fabricops-data/fabricops.db",
    remediation: Annotated[ActionMode, typer.Option(
        "--remediation", help="observe: propose only; approve: wait for `fabricops actions "
                              "approve`; auto: act when every safety check passes")]
    = ActionMode.APPROVE,
    actuator: Annotated[str, typer.Option(
        help="How actions reach the fabric: simulator (its control surface) or gnmi "
             "(port changes over gNMI Set, the rest through the simulator)")] = "simulator",
    webhook: Annotated[str, typer.Option(
        envvar="FABRICOPS_WEBHOOK_URL",
        help="POST every diagnosis and action change here (JSON, from a durable outbox)")]
    = "",
    webhook_secret: Annotated[str, typer.Option(
        envvar="FABRICOPS_WEBHOOK_SECRET", help="HMAC-SHA256 key for the webhook")] = "",
    alerts_file: Annotated[Path | None, typer.Option(
        "--alerts", envvar="FABRICOPS_ALERTS",
        help="Alert receivers YAML (several URLs, Alertmanager format, retry settings)")]
    = None,
    api_host: Annotated[str, typer.Option(help="Address the REST API listens on")]
    = "127.0.0.1",
    api_port: Annotated[int, typer.Option(min=0, max=65535, help=(
        "Port of the REST API and /metrics (0: any free port)"))] = 8080,
    api_token: Annotated[str, typer.Option(
        envvar="FABRICOPS_API_TOKEN", show_default=False,
        help="Bearer token for the API's mutating calls (default: a new one, written to "
             "fabricops-data/api.token)")] = "",
) -> None:
    """Run the stack on the embedded default: a simulated fabric, collectors, pipeline,
    root-cause analysis and remediation.

    The fabric (a scenario: topology, jobs, faults) runs in real time or faster
    and serves every switch over SNMP and gNMI on loopback and sends INT reports;
    the SNMP poller, the gNMI subscriber and the INT receiver collect them and
    publish on the bus (in-process by default, or Kafka). The pipeline turns
    the telemetry into keyframe segments and key events in the store (SQLite by
    default; read them with `fabricops query`) and samples implicated devices
    fast. The RCA publishes diagnoses; remediation proposes an action for each
    (list them with `fabricops actions list`) and, per --remediation, waits for
    approval or applies it, verifies it and rolls it back if it did not help.
    The REST API (and Prometheus /metrics) listens on 127.0.0.1:8080: ask it
    with `fabricops diagnose`, break the fabric with `fabricops sim inject`.
    A status line shows targets up and what moved. Ctrl-C stops it.

        fabricops up --duration 30
        fabricops up --preset pfc-storm --speed 5 --remediation auto
        fabricops up --bus kafka -b 127.0.0.1:9092 --webhook http://127.0.0.1:9000/hook
    """
    console = stderr_console()
    if actuator not in ACTUATORS:
        raise fail(f"--actuator must be one of {', '.join(ACTUATORS)}, not {actuator!r}")
    with user_errors():
        sim = build_simulator(on_wall_clock(choose_scenario(scenario, preset)))
        fabric = SimulatedFabric(sim, SimulatedFabricConfig(
            speed=speed, snmp_interval_s=snmp_interval, gnmi_interval_s=gnmi_interval,
            host_telemetry=True))
        _sqlite_dir(db)
        registry = CollectorRegistry()
        bus = open_bus(bus_kind, bootstrap, registry)
        pipeline = PipelineService(PipelineServiceConfig.model_validate(
            {"store": {"url": db}}), bus, sim.fabric.topology, registry)
        pipeline.start()
        fabric.start()
        analysis = start_analysis(bus, fabric, db, mode=remediation, actuator=actuator,
                                  registry=registry)
        collection = Collection(fabric.inventory(), bus, registry=registry)
        collection.start()
        metrics = StackMetrics(registry, bus, pipeline, sim.fabric.topology, collection)
        api = start_api(analysis.store, fabric, registry, host=api_host, port=api_port,
                        token=make_token(api_token))
        alerts = AlertDispatcher(alerts_config(alerts_file, webhook, webhook_secret, api.url),
                                 bus, analysis.store, registry)
        alerts.start()
        console.print(f"API on {api.url} (docs {api.url}/docs, metrics {api.url}/metrics); "
                      f"try: fabricops diagnose --api {api.url}")
        try:
            final, ran_s = _watch(collection, fabric, duration, console, pipeline,
                                  lambda: f"{len(analysis.rca.diagnoses):,} diagnoses")
        finally:
            api.stop()
            metrics.stop()
            collection.stop()
            fabric.stop()
            bus.flush(10.0)
            time.sleep(1.0)  # the worker's last poll
            alerts.stop()
            analysis.stop()
            pipeline.stop()
            bus.stop()
    if not stderr_is_terminal():
        console.print(_status_line(final, sim.time_s, ran_s, pipeline.status(),
                                   f"{len(analysis.rca.diagnoses):,} diagnoses"))
        console.print(f"stored in {db}; try: fabricops query events --db {db}; "
                      f"fabricops actions list --db {db}")


def on_wall_clock(scenario: Scenario) -> Scenario:
    """A live twin starts its clock now, like a real fabric (unless the scenario sets it)."""
    if "start_time_ns" in scenario.sim:
        return scenario
    now = time.time_ns() // 10**9 * 10**9
    return scenario.model_copy(update={"sim": {**scenario.sim, "start_time_ns": now}})


def _sqlite_dir(url: str) -> None:
    """Create the folder of a SQLite file URL, so the first run needs no set-up."""
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)


def collect(
    protocol: Annotated[str, typer.Argument(help="snmp, gnmi, int, or all")],
    inventory: Annotated[Path, typer.Option("--inventory", "-i", help="Inventory YAML")],
    duration: Seconds = 0.0,
    bus_kind: BusKind = "kafka",
    bootstrap: Bootstrap = "127.0.0.1:9092",
    metrics_port: MetricsPort = 0,
) -> None:
    """Collect from the devices of an inventory and publish on the bus.

    One process per protocol scales out: run `collect snmp` and `collect gnmi`
    side by side, each with its share of the inventory.

        fabricops collect gnmi -i inventory.yaml -b 127.0.0.1:9092
    """
    if protocol != "all" and protocol not in PROTOCOLS:
        raise fail(f"unknown protocol {protocol!r}; use one of: {', '.join(PROTOCOLS)}, all")
    chosen = PROTOCOLS if protocol == "all" else tuple(p for p in PROTOCOLS if p == protocol)
    console = stderr_console()
    with user_errors():
        inv = load_inventory(inventory)
        registry = CollectorRegistry()
        bus = open_bus(bus_kind, bootstrap, registry)
        collection = Collection(inv, bus, protocols=chosen, registry=registry)
        collection.start()
        if metrics_port:
            PlatformMetrics(PlatformMetricsConfig(), collection=collection,
                            registry=registry).start()
            start_http_server(metrics_port, registry=registry)
        try:
            final, ran_s = _watch(collection, None, duration, console)
        finally:
            collection.stop()
            bus.flush(10.0)
            bus.stop()
    if not stderr_is_terminal():
        console.print(_status_line(final, None, ran_s))
