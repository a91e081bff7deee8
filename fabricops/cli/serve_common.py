"""What every long-running command shares: options, the bus, the metrics port."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from prometheus_client import start_http_server

from fabricops.cli.lifecycle import Running
from fabricops.cli.preflight import StartupError, named, reachable_bootstrap
from fabricops.core.bus import Bus
from fabricops.core.bus_factory import BusConfig, make_bus

BusKind = Annotated[str, typer.Option("--bus", envvar="FABRICOPS_BUS__KIND",
                                      help="memory (in-process) or kafka")]
Bootstrap = Annotated[str, typer.Option(
    "--bootstrap", "-b", envvar="FABRICOPS_BUS__BOOTSTRAP_SERVERS",
    help="Kafka bootstrap servers, with --bus kafka")]
Db = Annotated[str, typer.Option("--db", envvar="FABRICOPS_STORE__URL",
                                 help="Store URL (SQLite file or PostgreSQL)")]
TopologyFile = Annotated[Path, typer.Option(
    "--topology", envvar="FABRICOPS_TOPOLOGY", help="Topology file (JSON or YAML)",
    show_default=False)]
JobsFile = Annotated[Path | None, typer.Option(
    "--jobs", envvar="FABRICOPS_JOBS", help="Job placement YAML (jobs: {JOB: [HOST, ...]})")]
MetricsPort = Annotated[int, typer.Option(
    "--metrics-port", envvar="FABRICOPS_METRICS_PORT", min=0, max=65535,
    help="Serve Prometheus /metrics on this port (0: off)")]
Seconds = Annotated[float, typer.Option(
    "--duration", min=0, help="Stop after this many wall seconds (0: run until stopped)")]


#: Where ``--metrics-port`` listens (every address, as Prometheus scrapes from outside).
METRICS_HOST = "0.0.0.0"


def checked_bus(kind: str, bootstrap: str) -> BusConfig:
    """The bus of ``--bus``/``--bootstrap``; with Kafka, a broker must answer now.

    Raises StartupError naming the flag."""
    if kind not in ("memory", "kafka"):
        raise StartupError(f"--bus {kind}: must be 'memory' or 'kafka'")
    if kind == "kafka":
        reachable_bootstrap(bootstrap)
    return BusConfig.model_validate({"kind": kind, "bootstrap_servers": bootstrap})


def start_bus(running: Running, config: BusConfig) -> Bus:
    """A started bus of ``config``, its metrics on the command's registry."""
    bus = make_bus(config, running.registry)
    bus.start()
    running.started(bus.stop)
    return bus


def start_metrics(running: Running, port: int) -> str:
    """Serve the registry's /metrics on ``port`` (checked free: ``free_port``); 0: off.
    Returns the words for the start-up line."""
    if not port:
        return "no metrics port"
    with named("--metrics-port", port):
        server, _ = start_http_server(port, addr=METRICS_HOST, registry=running.registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()

    running.started(stop)
    return f"metrics on :{port}/metrics"
