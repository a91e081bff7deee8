"""``fabricops probes``: plan INT probe flows that cover every link of a fabric."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from fabricops.cli.common import stdout_console, user_errors
from fabricops.core.topology import load_topology
from fabricops.pipeline.probes import (
    ProbePlanner,
    ProbePlannerConfig,
    one_probe_per_link_count,
    random_probes_for_coverage,
)
from fabricops.simulator.agents.tracer import SimulatedTracer
from fabricops.simulator.engine import Simulator
from fabricops.simulator.scenario import build_simulator, load_preset

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Plan INT probe flows: the fewest 5-tuples whose ECMP paths together cross "
         "every link, so that INT watches the whole fabric at low cost.",
)

DEFAULT_PRESET = "demo"
SHOWN_UNCOVERED = 20


def _simulator(preset: str | None, topology: Path | None) -> Simulator:
    """The simulated fabric of a topology file, else of a preset (jobs placed, t=0)."""
    if preset is not None and topology is not None:
        raise ValueError(f"give either --preset ({preset}) or --topology ({topology}), not both")
    if topology is not None:
        return Simulator(load_topology(topology))
    return build_simulator(load_preset(preset or DEFAULT_PRESET))


def plan_report(sim: Simulator, config: ProbePlannerConfig, trials: int) -> dict[str, Any]:
    """Plan on ``sim``'s forwarding now; the plan, its baselines and timings, as JSON data."""
    topo = sim.fabric.topology
    started = time.perf_counter()
    planner = ProbePlanner(config, topo, SimulatedTracer(sim))
    candidates = planner.trace(planner.candidates())
    plan = planner.cover(candidates)
    elapsed = time.perf_counter() - started
    rng = np.random.default_rng(config.seed)
    random = random_probes_for_coverage(candidates, plan.coverage, rng, trials=trials)
    return {
        "topology": topo.name, "kind": topo.kind,
        "links": len(topo.links),
        "candidates_traced": plan.candidates_traced,
        "candidates_unroutable": plan.candidates_unroutable,
        "plan_size": len(plan.probes), "coverage": plan.coverage,
        "one_probe_per_link": one_probe_per_link_count(
            topo, include_host_links=config.include_host_links),
        "random_probes_for_coverage": random if math.isfinite(random) else None,
        "random_trials": trials, "planning_s": round(elapsed, 4),
        "uncovered": [u._asdict() for u in plan.uncovered],
        "probes": [list(p) for p in plan.probes],
    }


def _render(console: Console, report: dict[str, Any]) -> None:
    """The plan's numbers as a two-column table, then the uncovered links."""
    name, kind = report["topology"], report["kind"]
    title = f"INT probe plan: {name}" + (f" ({kind})" if kind != name else "")
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    random = report["random_probes_for_coverage"]
    rows = [
        ("links", f"{report['links']:,}"),
        ("candidate flows traced", f"{report['candidates_traced']:,}"
                                   f" ({report['candidates_unroutable']:,} unroutable)"),
        ("plan: probe flows", f"{report['plan_size']:,}"),
        ("coverage", f"{report['coverage']:.2%}"),
        ("one probe per link", f"{report['one_probe_per_link']:,}"),
        (f"random probes for the same coverage (mean of {report['random_trials']})",
         "never reached" if random is None else f"{random:,.1f}"),
        ("planning time", f"{report['planning_s']:.3f} s"),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for item in report["uncovered"][:SHOWN_UNCOVERED]:
        console.print(f"uncovered {item['link']}: {item['detail']}")
    if len(report["uncovered"]) > SHOWN_UNCOVERED:
        console.print(f"... and {len(report['uncovered']) - SHOWN_UNCOVERED} more uncovered")


@app.command("plan")
def plan_cmd(
    preset: Annotated[
        str | None,
        typer.Option("--preset", "-p", show_default=False,
                     help=f"Plan on a shipped scenario's fabric (default: {DEFAULT_PRESET}; "
                          "see: fabricops sim presets)."),
    ] = None,
    topology: Annotated[
        Path | None,
        typer.Option("--topology", "-t", show_default=False,
                     help="Plan on the fabric of a topology file (.json or .yaml)."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seeds pairs and ports.")] = 0,
    sports_per_pair: Annotated[
        int, typer.Option("--sports-per-pair", min=1, max=16384,
                          help="UDP source ports tried per NIC pair (ECMP spread)."),
    ] = 16,
    max_candidates: Annotated[
        int, typer.Option("--max-candidates", min=1, help="Candidate flows traced at most."),
    ] = 100_000,
    switch_links_only: Annotated[
        bool, typer.Option("--switch-links-only",
                           help="Cover switch-to-switch links only, not NIC links."),
    ] = False,
    trials: Annotated[
        int, typer.Option("--random-trials", min=1,
                          help="Random orders averaged for the random baseline."),
    ] = 5,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the plan (with every probe flow) as JSON."),
    ] = False,
) -> None:
    """Plan the fewest INT probe flows that cover every link of a simulated fabric.

    Candidate flows (NIC pairs x UDP source ports) are traced through the
    fabric's ECMP forwarding; a greedy set cover keeps the fewest that cross
    every link. Links no flow can cross (down, drained) are listed with why.
    Compared with one probe per link and with random probes.

    Examples:

        fabricops probes plan                       (the demo preset, 512 GPUs)
        fabricops probes plan --topology fat-tree.yaml --json
    """
    with user_errors():
        sim = _simulator(preset, topology)
        config = ProbePlannerConfig(seed=seed, sports_per_pair=sports_per_pair,
                                    max_candidates=max_candidates,
                                    include_host_links=not switch_links_only)
        report = plan_report(sim, config, trials)
    if as_json:
        typer.echo(json.dumps(report))
        return
    _render(stdout_console(), report)
