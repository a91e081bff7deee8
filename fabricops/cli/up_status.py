"""The status line of ``fabricops up`` and ``fabricops collect``, and their main wait.

On a terminal the line is redrawn in place; otherwise (a pipe, a log file, a
service manager) it is printed as a new line every ``STATUS_EVERY_S`` seconds,
so a non-interactive run still shows that it is alive and what it moved."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.live import Live
from rich.text import Text

from fabricops.cli.common import stderr_is_terminal
from fabricops.cli.lifecycle import Running, serve_until_stopped
from fabricops.collectors.collection import Collection, CollectionStatus
from fabricops.pipeline.service import PipelineService, PipelineStatus
from fabricops.simulator.agents.service import SimulatedFabric

STATUS_EVERY_S = 10.0


def status_line(status: CollectionStatus, sim_s: float | None, wall_s: float,
                pipeline: PipelineStatus | None = None, analysis: str = "") -> Text:
    """Targets up and what moved: one line of ``  |  ``-separated parts."""
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


def watch(running: Running, collection: Collection, fabric: SimulatedFabric | None,
          duration: float, console: Console, pipeline: PipelineService | None = None,
          analysis: Callable[[], str] | None = None,
          every_s: float = STATUS_EVERY_S) -> tuple[CollectionStatus, float]:
    """Show the status line until ``duration`` passes, Ctrl-C or SIGTERM: redrawn
    live on a terminal, else printed once every ``every_s`` seconds. Return the
    collectors' last status and the wall seconds it ran.

    WorkerDiedError when a worker of ``running`` gives up first."""
    started = time.monotonic()
    live = Live(console=console, auto_refresh=False) if stderr_is_terminal() else None
    printed_at = 0.0

    def line(wall: float) -> Text:
        sim_s = fabric.sim.time_s if fabric is not None else None
        piped = pipeline.status() if pipeline is not None else None
        said = analysis() if analysis is not None else ""
        return status_line(collection.status(), sim_s, wall, piped, said)

    def show(wall: float) -> None:
        nonlocal printed_at
        if live is not None:
            live.update(line(wall), refresh=True)
        elif wall - printed_at >= every_s:
            printed_at = wall
            console.print(line(wall), soft_wrap=True)

    if live is not None:
        live.start()
    try:
        serve_until_stopped(running, duration, show)
    finally:
        if live is not None:
            live.stop()
    return collection.status(), time.monotonic() - started
