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
from prometheus_client import CollectorRegistry, start_http_server

from fabricops.api.alerts import AlertDispatcher, load_alerts_config
from fabricops.api.context import ApiConfig, ApiContext
from fabricops.api.platform_metrics import PlatformMetrics, PlatformMetricsConfig
from fabricops.api.server import ApiServer
from fabricops.api.stack_metrics import StackMetrics
from fabricops.cli.common import stderr_console, user_errors
from fabricops.cli.serve_common import (
    Bootstrap,
    BusKind,
    Db,
    JobsFile,
    MetricsPort,
    Seconds,
    TopologyFile,
    open_bus,
    run_until_stopped,
)
from fabricops.core.actions import ActionMode, StepOp
from fabricops.core.inventory import load_inventory
from fabricops.core.placement import load_placement
from fabricops.core.topology import load_topology
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


def _metrics(port: int, registry: CollectorRegistry) -> str:
    if not port:
        return "no metrics port"
    start_http_server(port, registry=registry)
    return f"metrics on :{port}/metrics"


@app.command("pipeline")
def pipeline_cmd(topology: TopologyFile, db: Db = "sqlite:///fabricops-data/fabricops.db",
                 bus_kind: BusKind = "kafka", bootstrap: Bootstrap = "127.0.0.1:9092",
                 metrics_port: MetricsPort = 0, duration: Seconds = 0.0) -> None:
    """Telemetry to keyframe segments and key events in the store; adaptive sampling.

        fabricops serve pipeline --topology topology.json --db postgresql+psycopg://...
    """
    console = stderr_console()
    with user_errors():
        topo = load_topology(topology)
        registry = CollectorRegistry()
        bus = open_bus(bus_kind, bootstrap, registry)
        service = PipelineService(PipelineServiceConfig.model_validate(
            {"store": {"url": db}}), bus, topo, registry)
        service.start()
        metrics = StackMetrics(registry, bus, service, topo)
        console.print(f"pipeline: {bus_kind} {bootstrap} -> {db}; "
                      f"{_metrics(metrics_port, registry)}")
        run_until_stopped(duration, [metrics.stop, service.stop, bus.stop])


@app.command("rca")
def rca_cmd(topology: TopologyFile, jobs: JobsFile = None,
            db: Db = "sqlite:///fabricops-data/fabricops.db", bus_kind: BusKind = "kafka",
            bootstrap: Bootstrap = "127.0.0.1:9092", metrics_port: MetricsPort = 0,
            duration: Seconds = 0.0) -> None:
    """Root-cause analysis: diagnoses on diagnoses.v1 and in the store.

        fabricops serve rca --topology topology.json --jobs jobs.yaml
    """
    console = stderr_console()
    with user_errors():
        topo = load_topology(topology)
        placement = load_placement(jobs, topo) if jobs else None
        registry = CollectorRegistry()
        store = Store(StoreConfig(url=db))
        store.start()
        bus = open_bus(bus_kind, bootstrap, registry)
        service = RcaService(RcaServiceConfig(), bus, topo, RcaModel.load(DEFAULT_MODEL), store,
                             placement, registry=registry)
        service.start()
        console.print(f"rca: {bus_kind} {bootstrap}, store {db}; "
                      f"{_metrics(metrics_port, registry)}")
        run_until_stopped(duration, [service.stop, bus.stop, store.stop])


@app.command("remediation")
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
    with user_errors():
        topo = load_topology(topology)
        placement = load_placement(jobs, topo) if jobs else None
        registry = CollectorRegistry()
        actuators = _actuators(inventory, hook, secret, registry)
        if not actuators.by_op:
            console.print("remediation: no --inventory and no --hook: actions can be "
                          "proposed and approved, but not applied")
        store = Store(StoreConfig(url=db))
        store.start()
        bus = open_bus(bus_kind, bootstrap, registry)
        engine = RemediationEngine(RemediationConfig.model_validate(
            {"safety": {"mode": mode.value}}), topo, actuators, FabricWatch(topo), placement,
            registry=registry)
        notifier = WebhookNotifier(WebhookClient(WebhookConfig.model_validate(
            {"url": webhook, "secret": secret}))) if webhook else None
        service = RemediationService(RemediationServiceConfig(), bus, engine, store, notifier,
                                     registry=registry)
        service.start()
        console.print(f"remediation ({mode.value}): {bus_kind} {bootstrap}, store {db}; "
                      f"{_metrics(metrics_port, registry)}")
        run_until_stopped(duration, [service.stop, bus.stop, store.stop])


def _actuators(inventory: Path | None, hook: str, secret: str,
               registry: CollectorRegistry) -> Actuators:
    by_op: dict[StepOp, Actuator] = {}
    if hook:
        actuator = WebhookActuator(WebhookClient(WebhookConfig.model_validate(
            {"url": hook, "secret": secret}), registry=registry), registry=registry)
        by_op.update(dict.fromkeys(actuator.ops, actuator))
    if inventory is not None:
        try:
            gnmi = GnmiSetActuator.for_inventory(load_inventory(inventory), registry)
        except ValueError as exc:
            raise ValueError(f"{inventory}: {exc}") from None
        by_op.update(dict.fromkeys(gnmi.ops, gnmi))
    return Actuators(by_op)


@app.command("api")
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
    alert webhooks too (they read diagnoses.v1 and actions.v1).

        FABRICOPS_API_TOKEN=... fabricops serve api --topology topology.json --host 0.0.0.0
    """
    console = stderr_console()
    with user_errors():
        topo = load_topology(topology) if topology else None
        store = Store(StoreConfig(url=db))
        store.start()
        ctx = ApiContext(config=ApiConfig.model_validate(
            {"host": host, "port": port, "token": token}), store=store, topology=topo)
        platform = PlatformMetrics(PlatformMetricsConfig(), store, registry=ctx.registry)
        platform.start()
        server = ApiServer(ctx)
        server.start()
        if not token:
            console.print("api: no --token / FABRICOPS_API_TOKEN: every mutating call is "
                          "refused")
        console.print(f"api: {server.url} (docs {server.url}/docs), store {db}")
        stops = [server.stop, platform.stop]
        if alerts_file is not None:
            bus = open_bus(bus_kind, bootstrap, ctx.registry)
            alerts = AlertDispatcher(load_alerts_config(alerts_file), bus, store, ctx.registry)
            alerts.start()
            stops += [alerts.stop, bus.stop]
        run_until_stopped(duration, [*stops, store.stop])
