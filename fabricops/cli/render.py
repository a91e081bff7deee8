"""Rich rendering of topologies, run summaries, run files and frames.

Every function takes the ``Console`` to print on and plain data; none reads
files or touches global state, so commands decide where output goes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from fabricops.cli.tables import ALWAYS, Col, listing
from fabricops.core.frame import Frame
from fabricops.core.topology import Topology
from fabricops.simulator.run import JobWindow, RunSummary

_BLOCKS = " ▏▎▍▌▋▊▉█"
_COUNTS = ("switches", "hosts", "nics", "ports", "links")
_UTIL_STATS = ("mean", "min", "p50", "p99", "max", "cv")


def bar(value: float, peak: float, width: int = 20) -> str:
    """A bar of block characters, ``width`` cells long at ``peak`` (eighths resolution)."""
    if peak <= 0 or value <= 0:
        return ""
    eighths = round(min(value / peak, 1.0) * width * 8)
    full, part = divmod(eighths, 8)
    return "█" * full + (_BLOCKS[part] if part else "")


def human_bytes(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover - loop always returns


def seconds(value: float | None, missing: str = "end of run") -> str:
    """``12.0`` -> ``"12 s"``; None -> ``missing``."""
    return missing if value is None else f"{value:g} s"


def topology_counts(console: Console, counts: Mapping[str, int], title: str = "Topology") -> None:
    """The switch/host/NIC/port/link counts as a one-row table."""
    table = Table(title=title, title_justify="left")
    for key in _COUNTS:
        table.add_column(key, justify="right")
    table.add_row(*(f"{counts.get(key, 0):,}" for key in _COUNTS))
    console.print(table)


def topology_summary(console: Console, topo: Topology, title: str | None = None) -> None:
    """Name, kind, builder parameters and counts of a topology."""
    params = ", ".join(f"{k}={v}" for k, v in topo.params.items()) or "none"
    console.print(f"[bold]{topo.name}[/bold] (kind {topo.kind}; parameters: {params})")
    topology_counts(console, topo.summary(), title or "Topology")


def topology_links(console: Console, topo: Topology, limit: int) -> None:
    """The first ``limit`` links, one row each (end a, end b)."""
    cols = (Col("#", 3, right=True), Col("a", ALWAYS), Col("b", ALWAYS))
    rows = [(str(i), link.a, link.b) for i, link in enumerate(topo.links[:limit])]
    console.print(listing(f"First {min(limit, len(topo.links))} of {len(topo.links)} links",
                          cols, rows, console.width))


def presets(console: Console, items: Iterable[tuple[str, str]]) -> None:
    """Shipped scenarios with their descriptions."""
    table = Table(title="Shipped scenarios (fabricops sim run --preset NAME)",
                  title_justify="left")
    table.add_column("preset", style="bold", no_wrap=True)
    table.add_column("description")
    for name, description in items:
        table.add_row(name, description)
    console.print(table)


def utilization(console: Console, stats: Mapping[str, float]) -> None:
    """Spread of run-average utilization over fabric (switch-to-switch) links."""
    title = "Fabric link utilization (switch-to-switch)"
    if not stats:
        console.print(f"[bold]{title}[/bold]: no switch-to-switch links")
        return
    table = Table(title=title, title_justify="left")
    for key in _UTIL_STATS:
        table.add_column(key.upper() if key == "cv" else key, justify="right")
    table.add_row(*(f"{100 * stats.get(key, 0.0):.1f} %" for key in _UTIL_STATS))
    console.print(table)


def paused_ports(console: Console, ports: Sequence[tuple[str, int]]) -> None:
    """Ports that sent or received the most PFC pause frames."""
    if not ports:
        console.print("[bold]Top paused ports[/bold]: no PFC pause frames")
        return
    table = Table(title="Top paused ports", title_justify="left")
    table.add_column("port")
    table.add_column("PFC pause frames (tx + rx)", justify="right")
    for port, frames in ports:
        table.add_row(port, f"{frames:,}")
    console.print(table)


def job_throughput(console: Console, name: str, windows: Sequence[JobWindow]) -> None:
    """One job's goodput per NIC and completed steps, window by window."""
    peak = max((w.goodput_gbps_per_nic for w in windows), default=0.0)
    table = Table(title=f"Job {name} throughput", title_justify="left")
    table.add_column("time", no_wrap=True)
    table.add_column("Gb/s per NIC", justify="right")
    table.add_column("steps", justify="right")
    table.add_column("", no_wrap=True, style="cyan")
    for w in windows:
        span = f"{w.start_s:g}-{w.end_s:g} s"
        gbps = w.goodput_gbps_per_nic
        table.add_row(span, f"{gbps:.1f}", str(w.steps), bar(gbps, peak))
    console.print(table)


def faults(console: Console, items: Sequence[Mapping[str, Any]],
           title: str = "Injected faults (ground truth)") -> None:
    """Fault ground truth: type, entity, start and end."""
    if not items:
        console.print(f"[bold]{title}[/bold]: none")
        return
    cols = (Col("#", 3, right=True), Col("type", ALWAYS), Col("entity", ALWAYS),
            Col("start", ALWAYS, right=True), Col("end", 5, right=True))
    rows = [(str(item.get("fault_id", i)), str(item.get("type")), str(item.get("entity")),
             seconds(item.get("start_s")), seconds(item.get("end_s")))
            for i, item in enumerate(items)]
    table = listing(title, cols, rows, console.width)
    console.print(table)


def run_summary(console: Console, summary: RunSummary, disk_bytes: int | None = None) -> None:
    """Everything an operator wants to see after ``fabricops sim run``."""
    console.print(f"[bold]Scenario {summary.scenario}[/bold]: {summary.ticks} ticks, "
                  f"{summary.simulated_s:g} s simulated")
    topology_counts(console, summary.topology)
    utilization(console, summary.utilization)
    paused_ports(console, summary.top_paused_ports)
    for name, windows in summary.jobs.items():
        job_throughput(console, name, windows)
    if not summary.jobs:
        console.print("[bold]Jobs[/bold]: none")
    faults(console, summary.faults)
    console.print(f"Speed: {summary.simulated_s:g} simulated s in {summary.wall_s:.2f} wall s "
                  f"({summary.speedup:,.1f} simulated s per wall s)")
    if summary.run_file is not None:
        size = human_bytes(disk_bytes if disk_bytes is not None else summary.run_file_bytes)
        console.print(f"Run file: {summary.run_file} ({size}; "
                      f"{human_bytes(summary.run_file_bytes)} before compression)")


def run_header(console: Console, header: Mapping[str, Any], counts: Mapping[str, int]) -> None:
    """A run file's header plus its tick/frame/sample counts."""
    scenario = header.get("scenario", {})
    name = scenario.get("name", "?") if isinstance(scenario, dict) else "?"
    console.print(f"[bold]Scenario {name}[/bold] (codec version "
                  f"{header.get('codec_version', '?')})")
    topology_counts(console, header.get("topology", {}))
    console.print(f"{counts['ticks']:,} ticks, {counts['frames']:,} frames, "
                  f"{counts['samples']:,} samples")


def frame(console: Console, item: Frame, tick: int) -> None:
    """One device's frame: every sample as (entity, metric, value)."""
    doc = item.to_json_dict()
    console.print(f"[bold]{item.device}[/bold] at tick {tick}: ts_ns {item.ts_ns}, "
                  f"seq {item.seq}, source {item.source}, {item.n_samples} samples")
    table = Table()
    table.add_column("entity", no_wrap=True)
    table.add_column("metric", no_wrap=True)
    table.add_column("value", justify="right")
    for sample in doc["samples"]:
        value = sample["value"]
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        table.add_row(sample["entity"], sample["metric"], shown)
    console.print(table)
