"""``fabricops up`` and ``fabricops collect``: the stack, and collectors on their own.

Both check every flag and file before they start anything (``preflight``),
then start their parts in order under ``running_command``, which stops all of
them whichever way the command ends.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from fabricops.api.alerts import AlertsConfig
from fabricops.api.platform_metrics import PlatformMetrics, PlatformMetricsConfig
from fabricops.api.server import api_url
from fabricops.api.stack_metrics import StackMetrics
from fabricops.cli.api_client import TOKEN_FILE
from fabricops.cli.common import fail, stderr_console, stderr_is_terminal
from fabricops.cli.lifecycle import Running, running_command
from fabricops.cli.preflight import checked_alerts, checked_db, checked_webhook, free_port, named
from fabricops.cli.serve_common import (
    METRICS_HOST,
    Bootstrap,
    BusKind,
    GnmiPasswordFile,
    GnmiSecurity,
    GnmiSelfSigned,
    GnmiTlsCert,
    GnmiTlsKey,
    GnmiUsername,
    MetricsPort,
    Retention,
    Seconds,
    checked_bus,
    checked_gnmi_security,
    checked_retention,
    start_bus,
    start_metrics,
)
from fabricops.cli.sim import choose_scenario
from fabricops.cli.up_analysis import ACTUATORS, Analysis, start_analysis
from fabricops.cli.up_api import alerts_config, start_alerts, start_fabric_api
from fabricops.cli.up_api import api_token as make_token
from fabricops.cli.up_status import status_line, watch
from fabricops.collectors.collection import PROTOCOLS, Collection
from fabricops.collectors.collection import Protocol as CollectedProtocol
from fabricops.collectors.gnmi_explain import render_explain
from fabricops.core.actions import ActionMode
from fabricops.core.bus import Bus
from fabricops.core.bus_factory import BusConfig
from fabricops.core.inventory import Inventory, load_inventory
from fabricops.core.wording import counted
from fabricops.pipeline.service import PipelineService, PipelineServiceConfig
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.scenario import Scenario, build_simulator, with_tick

#: Where the simulated fabric's agents listen and its INT reports go, in ``up``.
LOOPBACK = "127.0.0.1"
#: Where ``up`` keeps what it makes for local commands (API token, gNMI certificate).
DATA_DIR = TOKEN_FILE.parent


def up(
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML for the simulated fabric (default: the demo preset)")] = None,
    preset: Annotated[str | None, typer.Option("--preset", "-p", help="A shipped scenario")]
    = None,
    speed: Annotated[float, typer.Option(min=0.01, help="Simulated seconds per wall second")]
    = 1.0,
    tick: Annotated[float | None, typer.Option(
        "--tick", min=0.001, max=60, help="Simulated seconds per twin tick (default: the "
        "scenario's; 0.1 resolves sub-second episodes such as a short PFC storm)")] = None,
    duration: Seconds = 0.0,
    retention: Retention = "7d",
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
    int_port: Annotated[int, typer.Option(
        "--int-port", min=0, max=65535,
        help="UDP port on 127.0.0.1 the INT collector listens on and the fabric sends its "
             "reports to (0: any free port)")] = 32766,
    snmp_port: Annotated[int, typer.Option(
        "--snmp-port", min=0, max=65535,
        help="UDP port on 127.0.0.1 of the fabric's SNMP agent (0: any free port)")] = 0,
    gnmi_port: Annotated[int, typer.Option(
        "--gnmi-port", min=0, max=65535,
        help="TCP port on 127.0.0.1 of the fabric's gNMI target (0: any free port)")] = 0,
    gnmi_tls_cert: GnmiTlsCert = None,
    gnmi_tls_key: GnmiTlsKey = None,
    gnmi_tls_self_signed: GnmiSelfSigned = False,
    gnmi_username: GnmiUsername = None,
    gnmi_password_file: GnmiPasswordFile = None,
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
    A status line shows targets up and what moved. Ctrl-C stops it. The gNMI
    target takes TLS (--gnmi-tls-cert/--gnmi-tls-key, or --gnmi-tls-self-signed
    into fabricops-data/) and a login (--gnmi-username, the password in
    $FABRICOPS_GNMI_PASSWORD or --gnmi-password-file); the gNMI collector is
    given the same.

        fabricops up --duration 30
        fabricops up --preset pfc-storm --speed 5 --remediation auto
        fabricops up --bus kafka -b 127.0.0.1:9092 --webhook http://127.0.0.1:9000/hook
        FABRICOPS_GNMI_PASSWORD=... fabricops up --gnmi-tls-self-signed --gnmi-username admin
    """
    console = stderr_console()
    with running_command() as running:
        if actuator not in ACTUATORS:
            raise fail(f"--actuator {actuator}: must be one of {', '.join(ACTUATORS)}")
        live = live_scenario(scenario, preset, tick)
        checked_db(db)
        retention_s = checked_retention(retention)
        alerts = checked_alerts(alerts_file)
        hook = checked_webhook(webhook, webhook_secret) if webhook else None
        bus_config = checked_bus(bus_kind, bootstrap)
        api_port = free_port("--api-port", api_host, api_port)
        int_port = free_port("--int-port", LOOPBACK, int_port, udp=True)
        for flag, port, udp in (("--snmp-port", snmp_port, True),
                                ("--gnmi-port", gnmi_port, False)):
            if port:
                free_port(flag, LOOPBACK, port, udp=udp)
        security = checked_gnmi_security(
            cert=gnmi_tls_cert, key=gnmi_tls_key, self_signed=gnmi_tls_self_signed,
            username=gnmi_username, password_file=gnmi_password_file, data_dir=DATA_DIR,
            hosts=(LOOPBACK,))
        with named("--webhook", webhook):
            receivers = alerts_config(alerts, hook, api_url(api_host, api_port))
        fabric = SimulatedFabric(build_simulator(live), SimulatedFabricConfig.model_validate({
            "speed": speed, "snmp_interval_s": snmp_interval, "gnmi_interval_s": gnmi_interval,
            "host_telemetry": True, "snmp": {"host": LOOPBACK, "port": snmp_port},
            "gnmi": {"host": LOOPBACK, "port": gnmi_port, **security.target_fields()},
            "int_exporter": {"collector_host": LOOPBACK, "collector_port": int_port}}))
        stack = _start_stack(running, fabric, bus_config, db, receivers, mode=remediation,
                             actuator=actuator, security=security, retention_s=retention_s)
        api = start_fabric_api(running, stack.analysis.store, fabric, host=api_host,
                               port=api_port, token=make_token(api_token))
        console.print(f"API on {api.url} (docs {api.url}/docs, metrics {api.url}/metrics); "
                      f"try: fabricops diagnose --api {api.url}")
        if security.credentials():
            console.print(f"gNMI target on {fabric.gnmi.address}: {security.describe()}")
        final, ran_s = watch(running, stack.collection, fabric, duration, console,
                             stack.pipeline, stack.diagnoses)
    if not stderr_is_terminal():
        console.print(status_line(final, fabric.sim.time_s, ran_s, stack.pipeline.status(),
                                  stack.diagnoses()), soft_wrap=True)
        console.print(f"stored in {db}; try: fabricops query events --db {db}; "
                      f"fabricops actions list --db {db}")


@dataclass(frozen=True)
class _Stack:
    """The parts of ``up`` behind the API, started."""

    pipeline: PipelineService
    analysis: Analysis
    collection: Collection

    def diagnoses(self) -> str:
        return counted(len(self.analysis.rca.diagnoses), "diagnosis")


def _start_stack(running: Running, fabric: SimulatedFabric, bus_config: BusConfig, db: str,
                 receivers: AlertsConfig, *, mode: ActionMode, actuator: str,
                 security: GnmiSecurity, retention_s: float) -> _Stack:
    """Bus, pipeline, fabric, analysis, alerts, collectors and metrics, in that order.

    ``running`` stops them in the reverse one, the bus drained once the
    collectors have stopped so that alerts and analysis take its last records."""
    topology = fabric.sim.fabric.topology
    bus = start_bus(running, bus_config)
    pipeline = PipelineService(PipelineServiceConfig.model_validate(
        {"store": {"url": db, "retention_s": retention_s}}), bus, topology, running.registry,
        running.liveness)
    with named("--db", pipeline.store.url):
        pipeline.start()
    running.started(pipeline.stop)
    fabric.start()
    running.started(fabric.stop)
    inventory = security.secure(fabric.inventory())
    analysis = start_analysis(running, bus, fabric, db, mode=mode, actuator=actuator,
                              inventory=inventory)
    start_alerts(running, receivers, bus, analysis.store)
    running.started(lambda: _drain(bus))
    collection = _start_collection(running, inventory, bus, PROTOCOLS)
    metrics = StackMetrics(running.registry, bus, pipeline, topology, collection,
                           liveness=running.liveness)
    running.started(metrics.stop)
    return _Stack(pipeline, analysis, collection)


def _drain(bus: Bus) -> None:
    """Deliver what is on the bus, and give its consumers a last poll."""
    bus.flush(10.0)
    time.sleep(1.0)


def _start_collection(running: Running, inventory: Inventory, bus: Bus,
                      protocols: Sequence[CollectedProtocol]) -> Collection:
    collection = Collection(inventory, bus, protocols=protocols, registry=running.registry,
                            liveness=running.liveness)
    collection.start()
    running.started(collection.stop)
    return collection


def live_scenario(file: Path | None, preset: str | None,
                  tick_s: float | None = None) -> Scenario:
    """The scenario of SCENARIO or ``--preset`` (errors naming it), ticking every
    ``tick_s`` (``--tick``; None: its own), on the wall clock."""
    if preset is not None and file is None:
        with named("--preset", preset):
            return on_wall_clock(with_tick(choose_scenario(None, preset), tick_s))
    return on_wall_clock(with_tick(choose_scenario(file, preset), tick_s))


def on_wall_clock(scenario: Scenario) -> Scenario:
    """A live twin's clock reads the wall clock, like a real fabric's (unless the scenario
    sets it), and its frames are never stamped ahead of it.

    A frame is stamped at the end of the tick it covers, while the driver simulates
    a tick as soon as its wall-clock period starts (the first one at once): the clock
    therefore starts one tick before now, now rounded down to a whole tick, so the
    first frame is stamped at or before the wall-clock time it is published."""
    if "start_time_ns" in scenario.sim:
        return scenario
    tick_ns = max(round(scenario.tick_s * 1e9), 1)
    start = time.time_ns() // tick_ns * tick_ns - tick_ns
    return scenario.model_copy(update={"sim": {**scenario.sim, "start_time_ns": start}})


def collect(
    protocol: Annotated[str, typer.Argument(help="snmp, gnmi, int, or all")],
    inventory: Annotated[Path, typer.Option("--inventory", "-i", help="Inventory YAML")],
    duration: Seconds = 0.0,
    bus_kind: BusKind = "kafka",
    bootstrap: Bootstrap = "127.0.0.1:9092",
    metrics_port: MetricsPort = 0,
    explain: Annotated[bool, typer.Option(
        "--explain", help="At the end, print per gNMI target its profile and what its leaf "
        "updates became: mapped, deliberately unsupported, unmapped paths")] = False,
) -> None:
    """Collect from the devices of an inventory and publish on the bus.

    One process per protocol scales out: run `collect snmp` and `collect gnmi`
    side by side, each with its share of the inventory. The INT receiver
    listens where the inventory's `int.listen` says.

        fabricops collect gnmi -i inventory.yaml -b 127.0.0.1:9092
    """
    console = stderr_console()
    with running_command() as running:
        if protocol != "all" and protocol not in PROTOCOLS:
            raise fail(f"unknown protocol {protocol!r}; use one of: {', '.join(PROTOCOLS)}, "
                       f"all")
        chosen = PROTOCOLS if protocol == "all" else tuple(p for p in PROTOCOLS if p == protocol)
        with named("--inventory", inventory):
            inv = load_inventory(inventory)
        bus_config = checked_bus(bus_kind, bootstrap)
        if metrics_port:
            free_port("--metrics-port", METRICS_HOST, metrics_port)
        if "int" in chosen and inv.int is not None:
            host, _, port = inv.int.listen.rpartition(":")
            free_port(f"--inventory {inventory}: int.listen", host, int(port), udp=True)
        bus = start_bus(running, bus_config)
        running.started(lambda: bus.flush(10.0))
        collection = _start_collection(running, inv, bus, chosen)
        if metrics_port:
            platform = PlatformMetrics(PlatformMetricsConfig(), collection=collection,
                                       registry=running.registry)
            platform.start()
            running.started(platform.stop)
            start_metrics(running, metrics_port)
        final, ran_s = watch(running, collection, None, duration, console)
    if not stderr_is_terminal():
        console.print(status_line(final, None, ran_s), soft_wrap=True)
    if explain and collection.gnmi is not None:
        print(render_explain(collection.gnmi.explain()), end="")
