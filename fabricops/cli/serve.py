"""``fabricops serve``: one component per process, against Kafka and a shared store.

This is how fabricops is deployed (docker-compose, Kubernetes): the collectors
(``fabricops collect``), the pipeline, the RCA, remediation and the API each
run as their own process, meet on Kafka topics and share one PostgreSQL.
Every option also reads an environment variable, so a deployment configures
them without a command line. SIGTERM or Ctrl-C stops a component cleanly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from prometheus_client import CollectorRegistry

from fabricops.api.context import ApiConfig, ApiContext
from fabricops.api.platform_metrics import PlatformMetrics, PlatformMetricsConfig
from fabricops.api.stack_metrics import StackMetrics
from fabricops.cli.common import EXIT_CODES_HELP, error_message, stderr_console
from fabricops.cli.lifecycle import Running, running_command, serve_until_stopped
from fabricops.cli.preflight import StartupError, checked_alerts, checked_db, free_port, named
from fabricops.cli.serve_common import (
    METRICS_HOST,
    Bootstrap,
    BusKind,
    Db,
    JobsFile,
    MergeAfter,
    MetricsPort,
    Retention,
    Seconds,
    TopologyFile,
    Upkeep,
    UpkeepEvery,
    checked_bus,
    checked_duration,
    checked_retention,
    start_bus,
    start_metrics,
)
from fabricops.cli.serve_sim import serve_sim
from fabricops.cli.up_api import start_alerts, start_api
from fabricops.core.actions import ActionMode, StepOp
from fabricops.core.inventory import load_inventory
from fabricops.core.placement import load_placement
from fabricops.core.topology import Topology, load_topology
from fabricops.pipeline.service import PipelineService, PipelineServiceConfig
from fabricops.rca.model import DEFAULT_MODEL, RcaModel
from fabricops.rca.service import RcaService, RcaServiceConfig
from fabricops.remediation.actuator import Actuator, Actuators
from fabricops.remediation.engine import RemediationConfig, RemediationEngine
from fabricops.remediation.gnmi_actuator import GnmiSetActuator
from fabricops.remediation.service import RemediationService, RemediationServiceConfig
from fabricops.remediation.watch import FabricWatch
from fabricops.remediation.webhook import (
    WebhookActuator,
    WebhookClient,
    WebhookConfig,
    WebhookNotifier,
)
from fabricops.store.store import Store, StoreConfig

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Run one fabricops component per process (pipeline, rca, remediation, api, sim) "
         "against Kafka and PostgreSQL. Collectors run with [bold]fabricops collect[/bold].",
)


def _start_store(running: Running, db: str) -> Store:
    store = Store(StoreConfig(url=db))
    with named("--db", store.url):
        store.start()
    running.started(store.stop)
    return store


def _topology(path: Path) -> Topology:
    with named("--topology", path):
        return load_topology(path)


def _placement(jobs: Path | None, topology: Topology) -> dict[str, list[str]] | None:
    if jobs is None:
        return None
    with named("--jobs", jobs):
        return load_placement(jobs, topology)


def _check_metrics_port(port: int) -> None:
    if port:
        free_port("--metrics-port", METRICS_HOST, port)


@app.command("pipeline", epilog=EXIT_CODES_HELP)
def pipeline_cmd(topology: TopologyFile, db: Db = "sqlite:///fabricops-data/fabricops.db",
                 bus_kind: BusKind = "kafka", bootstrap: Bootstrap = "127.0.0.1:9092",
                 metrics_port: MetricsPort = 0, duration: Seconds = 0.0,
                 retention: Retention = "7d", upkeep: Upkeep = True,
                 upkeep_every: UpkeepEvery = "10m", merge_after: MergeAfter = "1h") -> None:
    """Telemetry to keyframe segments and key events in the store; adaptive sampling.

    Every --upkeep-every (ten minutes) the store is kept: segments that ended
    --merge-after (an hour) before their stream's newest data are merged into
    ten-minute ones (fewer bytes, the same points) and telemetry older than
    --retention is deleted (see `fabricops store --help`).

        fabricops serve pipeline --topology topology.json --db postgresql+psycopg://...
    """
    console = stderr_console()
    with running_command() as running:
        topo = _topology(topology)
        checked_db(db)
        bus_config = checked_bus(bus_kind, bootstrap)
        _check_metrics_port(metrics_port)
        retention_s = checked_retention(retention)
        every_s = checked_duration(upkeep_every, "--upkeep-every", at_least="10s")
        after_s = checked_duration(merge_after, "--merge-after")
        bus = start_bus(running, bus_config)
        service = PipelineService(PipelineServiceConfig.model_validate(
            {"store": {"url": db, "retention_s": retention_s},
             "upkeep": {"enabled": upkeep, "interval_s": every_s, "merge_after_s": after_s}}),
            bus, topo, running.registry, running.liveness)
        with named("--db", service.store.url):
            service.start()
        running.started(service.stop)
        metrics = StackMetrics(running.registry, bus, service, topo,
                               liveness=running.liveness)
        running.started(metrics.stop)
        console.print(f"pipeline: {bus_kind} {bootstrap} -> {db}; "
                      f"{start_metrics(running, metrics_port)}")
        serve_until_stopped(running, duration)


CatchUp = Annotated[float, typer.Option(
    "--catch-up", min=1.0, metavar="SECONDS",
    help="Behind the telemetry stream, analyse at least every SECONDS of telemetry "
         "(1: every second, however far behind)")]


@app.command("rca", epilog=EXIT_CODES_HELP)
def rca_cmd(topology: TopologyFile, jobs: JobsFile = None,
            db: Db = "sqlite:///fabricops-data/fabricops.db", bus_kind: BusKind = "kafka",
            bootstrap: Bootstrap = "127.0.0.1:9092", metrics_port: MetricsPort = 0,
            duration: Seconds = 0.0, catch_up_s: CatchUp = 10.0) -> None:
    """Root-cause analysis: diagnoses on diagnoses.v2 and in the store.

    One analysis a second of telemetry. Behind the stream (a backlog after a
    restart, or more telemetry than one process folds in real time) it analyses
    less often, at least every --catch-up seconds of telemetry, and catches up;
    the log says so and fabricops_rca_unanalysed_seconds shows how far it is.

        fabricops serve rca --topology topology.json --jobs jobs.yaml
    """
    console = stderr_console()
    with running_command() as running:
        topo = _topology(topology)
        placement = _placement(jobs, topo)
        checked_db(db)
        bus_config = checked_bus(bus_kind, bootstrap)
        _check_metrics_port(metrics_port)
        store = _start_store(running, db)
        bus = start_bus(running, bus_config)
        service = RcaService(RcaServiceConfig(catch_up_s=catch_up_s), bus, topo,
                             RcaModel.load(DEFAULT_MODEL), store, placement,
                             registry=running.registry, liveness=running.liveness)
        service.start()
        running.started(service.stop)
        console.print(f"rca: {bus_kind} {bootstrap}, store {db}; "
                      f"{start_metrics(running, metrics_port)}")
        serve_until_stopped(running, duration)


@app.command("remediation", epilog=EXIT_CODES_HELP)
def remediation_cmd(
    topology: TopologyFile, jobs: JobsFile = None,
    db: Db = "sqlite:///fabricops-data/fabricops.db", bus_kind: BusKind = "kafka",
    bootstrap: Bootstrap = "127.0.0.1:9092", metrics_port: MetricsPort = 0,
    duration: Seconds = 0.0,
    mode: Annotated[ActionMode, typer.Option(
        "--mode", envvar="FABRICOPS_REMEDIATION_MODE",
        help="observe: propose only; approve: wait for an operator; auto: act when every "
             "safety check passes")] = ActionMode.APPROVE,
    inventory: Annotated[Path | None, typer.Option(
        "--inventory", "-i", envvar="FABRICOPS_INVENTORY",
        help="Inventory YAML: port changes go over gNMI Set to its gNMI targets")] = None,
    hook: Annotated[str, typer.Option(
        "--hook", envvar="FABRICOPS_REMEDIATION_HOOK",
        help="URL of your automation: every step gNMI does not carry out is POSTed here "
             "(drain a host, attach a spare, open a ticket)")] = "",
    webhook: Annotated[str, typer.Option(
        envvar="FABRICOPS_WEBHOOK_URL", help="POST every action change here (JSON)")] = "",
    secret: Annotated[str, typer.Option(
        "--secret", envvar="FABRICOPS_WEBHOOK_SECRET",
        help="HMAC-SHA256 key for --hook and --webhook")] = "",
) -> None:
    """Remediation: an action per diagnosis, applied per --mode, verified, rolled back if
    it did not help.

        fabricops serve remediation --topology topology.json -i inventory.yaml --mode approve
    """
    console = stderr_console()
    with running_command() as running:
        topo = _topology(topology)
        placement = _placement(jobs, topo)
        actuators = _actuators(inventory, hook, secret, running.registry)
        with named("--webhook", webhook):
            notifier = WebhookNotifier(WebhookClient(WebhookConfig.model_validate(
                {"url": webhook, "secret": secret}))) if webhook else None
        checked_db(db)
        bus_config = checked_bus(bus_kind, bootstrap)
        _check_metrics_port(metrics_port)
        if not actuators.by_op:
            console.print("remediation: no --inventory and no --hook: actions can be "
                          "proposed and approved, but not applied")
        store = _start_store(running, db)
        bus = start_bus(running, bus_config)
        engine = RemediationEngine(RemediationConfig.model_validate(
            {"safety": {"mode": mode.value}}), topo, actuators, FabricWatch(topo), placement,
            registry=running.registry)
        service = RemediationService(RemediationServiceConfig(), bus, engine, store, notifier,
                                     registry=running.registry, liveness=running.liveness)
        service.start()
        running.started(service.stop)
        console.print(f"remediation ({mode.value}): {bus_kind} {bootstrap}, store {db}; "
                      f"{start_metrics(running, metrics_port)}")
        serve_until_stopped(running, duration)


def _actuators(inventory: Path | None, hook: str, secret: str,
               registry: CollectorRegistry) -> Actuators:
    by_op: dict[StepOp, Actuator] = {}
    if hook:
        with named("--hook", hook):
            config = WebhookConfig.model_validate({"url": hook, "secret": secret})
        actuator = WebhookActuator(WebhookClient(config, registry=registry), registry=registry)
        by_op.update(dict.fromkeys(actuator.ops, actuator))
    if inventory is not None:
        try:
            gnmi = GnmiSetActuator.for_inventory(load_inventory(inventory), registry)
        except ValueError as exc:
            cause = error_message(exc).removeprefix(f"{inventory}: ")
            raise StartupError(f"--inventory {inventory}: {cause}") from None
        by_op.update(dict.fromkeys(gnmi.ops, gnmi))
    return Actuators(by_op)


@app.command("api", epilog=EXIT_CODES_HELP)
def api_cmd(
    topology: Annotated[Path | None, typer.Option(
        "--topology", envvar="FABRICOPS_TOPOLOGY", help="Topology file (JSON or YAML)")]
    = None,
    db: Db = "sqlite:///fabricops-data/fabricops.db",
    host: Annotated[str, typer.Option(envvar="FABRICOPS_API_HOST", help="Listen address")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, envvar="FABRICOPS_API_PORT",
                                      help="Listen port")] = 8080,
    token: Annotated[str, typer.Option(
        envvar="FABRICOPS_API_TOKEN", show_default=False,
        help="Bearer token for mutating calls (without one, every mutation is refused)")]
    = "",
    alerts_file: Annotated[Path | None, typer.Option(
        "--alerts", envvar="FABRICOPS_ALERTS",
        help="Alert receivers YAML: diagnoses and actions are POSTed from a durable outbox")]
    = None,
    bus_kind: BusKind = "kafka", bootstrap: Bootstrap = "127.0.0.1:9092",
    duration: Seconds = 0.0,
) -> None:
    """The REST API and Prometheus /metrics over the shared store; with --alerts, the
    alert webhooks too (they read diagnoses.v2 and actions.v2).

        FABRICOPS_API_TOKEN=... fabricops serve api --topology topology.json --host 0.0.0.0
    """
    console = stderr_console()
    with running_command() as running:
        topo = _topology(topology) if topology else None
        checked_db(db)
        alerts = checked_alerts(alerts_file) if alerts_file is not None else None
        bus_config = checked_bus(bus_kind, bootstrap) if alerts is not None else None
        if port:
            free_port("--port", host, port)
        store = _start_store(running, db)
        ctx = ApiContext(config=ApiConfig.model_validate(
            {"host": host, "port": port, "token": token}), store=store, topology=topo,
            registry=running.registry, liveness=running.liveness)
        platform = PlatformMetrics(PlatformMetricsConfig(), store, registry=running.registry)
        platform.start()
        running.started(platform.stop)
        server = start_api(running, ctx, "--port")
        if not token:
            console.print("api: no --token / FABRICOPS_API_TOKEN: every mutating call is "
                          "refused")
        console.print(f"api: {server.url} (docs {server.url}/docs), store {db}")
        if alerts is not None and bus_config is not None:
            start_alerts(running, alerts, start_bus(running, bus_config), store)
        serve_until_stopped(running, duration)


app.command("sim", epilog=EXIT_CODES_HELP)(serve_sim)
