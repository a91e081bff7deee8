"""What every ``fabricops serve`` component shares: options, the bus, the run loop."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from prometheus_client import CollectorRegistry

from fabricops.cli.common import fail
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


def open_bus(kind: str, bootstrap: str, registry: CollectorRegistry | None = None) -> Bus:
    """A started bus of ``kind``; exit 2 naming the option if the kind is unknown."""
    if kind not in ("memory", "kafka"):
        raise fail(f"--bus must be 'memory' or 'kafka', not {kind!r}")
    bus = make_bus(BusConfig.model_validate({"kind": kind, "bootstrap_servers": bootstrap}),
                   registry)
    bus.start()
    return bus


def run_until_stopped(duration_s: float, stops: Sequence[Callable[[], None]],
                      tick: Callable[[float], None] | None = None) -> None:
    """Wait for SIGINT, SIGTERM or ``duration_s`` (0: forever), calling ``tick(wall_s)``
    twice a second; then call ``stops`` in order, each even if one before failed."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    try:
        while not stop.wait(0.5):
            wall = time.monotonic() - started
            if tick is not None:
                tick(wall)
            if duration_s and wall >= duration_s:
                break
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        errors = []
        for fn in stops:
            try:
                fn()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
