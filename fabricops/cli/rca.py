"""``fabricops rca``: train the root-cause model on simulated faults, and evaluate it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from fabricops.cli.common import fail, stderr_console, stdout_console, user_errors
from fabricops.rca.model import DEFAULT_MODEL, ModelError, RcaModel

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Root-cause analysis: train the model on labelled simulator scenarios (all fault "
         "types, several topologies and intensities, healthy runs, overlapping faults) and "
         "evaluate it on held-out scenarios beside two baselines.",
)

TARGETS = {"top1": 0.95, "top3": 0.99, "macro_f1": 0.95, "false_per_hour": 0.0,
           "ttd_median_s": 3.0}


@contextmanager
def _progress(what: str) -> Iterator[Callable[[int, int], None]]:
    bar = Progress("[progress.description]{task.description}", BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn(), console=stderr_console(),
                   transient=True)
    task = bar.add_task(what, total=None)
    with bar:
        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
        yield update


@app.command()
def train(
    out: Annotated[Path, typer.Option(help="Where to write the model file")] = DEFAULT_MODEL,
    scenarios: Annotated[int, typer.Option(min=10, help="Training scenarios to simulate")] = 400,
    workers: Annotated[int, typer.Option(min=1, help="Processes replaying scenarios")] = 2,
) -> None:
    """Simulate labelled scenarios (training seeds only) and fit the model.

    Example: [bold]fabricops rca train --scenarios 400 --out rca-model.bin[/bold]
    """
    from fabricops.evaluation.training import train as fit

    with user_errors():
        started = time.perf_counter()
        with _progress("replaying scenarios") as update:
            model = fit(scenarios, workers=workers, progress=update)
        path = model.save(out)
        rows = model.trained.get("rows_per_class", {})
        stdout_console().print(
            f"model [bold]{model.version}[/bold] written to {path} "
            f"({path.stat().st_size / 1e6:.1f} MB) from {scenarios} scenarios, "
            f"{sum(rows.values()):,} candidate rows, in {time.perf_counter() - started:.0f} s")


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    return f"{100 * v:.1f}%" if pct else f"{v:.2f}"


def render(summary: dict[str, Any]) -> Table:
    """The evaluation table: one column per method, targets beside."""
    methods = summary["methods"]
    table = Table(title=f"RCA evaluation: {summary['scenarios']} held-out faulty scenarios "
                        f"({', '.join(summary['topologies'])}), "
                        f"{summary['healthy_hours']:.2f} h of fault-free traffic")
    table.add_column("metric")
    for name in methods:
        table.add_column({"model": "fabricops RCA", "rules": "rules alone",
                          "votes": "path voting alone"}[name], justify="right")
    table.add_column("target", justify="right")
    rows = [("top-1 root entity", "top1", True, ">= 95%"), ("top-3 root entity", "top3", True,
                                                             ">= 99%"),
            ("top-1, fault met traffic", "top1_touched", True,
             f"n={summary['scenarios'] - summary['untouched']}"),
            ("top-3, fault met traffic", "top3_touched", True, ""),
            ("fault-type macro-F1", "macro_f1", False, ">= 0.95"),
            ("false diagnoses / healthy hour", "false_per_hour", False, "0"),
            ("median onset -> diagnosis (s)", "ttd_median_s", False, "<= 3"),
            ("p90 onset -> diagnosis (s)", "ttd_p90_s", False, "")]
    for label, key, pct, target in rows:
        table.add_row(label, *(_fmt(m[key], pct) for m in methods.values()), target)
    for ftype in methods["model"]["per_type"]:
        table.add_row(f"  F1 {ftype}", *(_fmt(m["per_type"][ftype]["f1"]) for m in
                                         methods.values()),
                      f"n={methods['model']['per_type'][ftype]['n']}")
    return table


@app.command(name="eval")
def evaluate(
    model: Annotated[Path, typer.Option(help="Model file to evaluate")] = DEFAULT_MODEL,
    scenarios: Annotated[int, typer.Option(min=1, help="Held-out faulty scenarios")] = 300,
    healthy_runs: Annotated[int, typer.Option(min=0, help="Long fault-free runs")] = 4,
    healthy_seconds: Annotated[float, typer.Option(min=10, help="Length of each")] = 900.0,
    workers: Annotated[int, typer.Option(min=1, help="Processes replaying scenarios")] = 2,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
) -> None:
    """Replay held-out scenarios (seeds never used in training) and print the scores.

    Every scenario goes simulator -> bus -> RCA; the RCA sees telemetry only.
    Example: [bold]fabricops rca eval --scenarios 300[/bold]
    """
    from fabricops.evaluation.evaluate import run, summary

    with user_errors():
        try:
            RcaModel.load(model)
        except ModelError as exc:
            raise fail(str(exc)) from None
        with _progress("evaluating") as update:
            result = summary(run(model, scenarios, healthy_runs=healthy_runs,
                                 healthy_s=healthy_seconds, workers=workers,
                                 progress=update))
        if as_json:
            typer.echo(json.dumps(result, indent=2))
            return
        stdout_console().print(render(result))
        m = result["methods"]["model"]
        met = [k for k, t in TARGETS.items()
               if m[k] is not None and (m[k] <= t if k in ("false_per_hour", "ttd_median_s")
                                        else m[k] >= t)]
        stdout_console().print(f"targets met: {len(met)}/{len(TARGETS)} "
                               f"({', '.join(met) or 'none'})")
