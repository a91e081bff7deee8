"""``fabricops rca``: train the root-cause model on simulated faults, and evaluate it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from fabricops.cli.common import fail, progress_bar, stdout_console, user_errors
from fabricops.cli.rca_report import (
    methods_table,
    reliability_table,
    shapes_table,
    soaks_table,
    targets_met,
    types_table,
)
from fabricops.rca.model import DEFAULT_MODEL, ModelError, RcaModel

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Root-cause analysis: train the model on labelled simulator scenarios (all fault "
         "types, several fabric shapes and intensities, healthy runs, overlapping faults, "
         "faults during flaps) and evaluate it on held-out shapes beside two baselines.",
)

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
        with progress_bar("replaying scenarios") as update:
            model = fit(scenarios, workers=workers, progress=update)
        path = model.save(out)
        rows = model.trained.get("rows_per_class", {})
        stdout_console().print(
            f"model [bold]{model.version}[/bold] written to {path} "
            f"({path.stat().st_size / 1e6:.1f} MB) from {scenarios} scenarios, "
            f"{sum(rows.values()):,} candidate rows, in {time.perf_counter() - started:.0f} s")


@app.command(name="eval")
def evaluate(
    model: Annotated[Path, typer.Option(help="Model file to evaluate")] = DEFAULT_MODEL,
    scenarios: Annotated[int, typer.Option(min=0, help="Faulty scenarios to replay")] = 120,
    split: Annotated[str, typer.Option(
        help="Shapes to draw from: held_out (never trained on), train, all")] = "held_out",
    family: Annotated[list[str] | None, typer.Option(
        help="Topology family (repeat): leaf_spine, fat_tree, rail_optimized")] = None,
    size: Annotated[list[int] | None, typer.Option(
        help="Fabric size (repeat): GPUs, or k for a fat-tree; default the split's sizes")] = None,
    oversubscription: Annotated[list[float] | None, typer.Option(
        help="Leaf oversubscription (repeat), e.g. 1 or 3")] = None,
    faults: Annotated[int, typer.Option(min=1, max=3,
                                        help="Overlapping faults per scenario")] = 1,
    during_flap: Annotated[bool, typer.Option(
        "--during-flap", help="A link flaps and the other faults start during the flap")] = False,
    fault_type: Annotated[list[str] | None, typer.Option(
        help="Only these fault types (repeat)")] = None,
    seed: Annotated[int, typer.Option(help="Seed stream (training uses 1)")] = 2,
    first: Annotated[int, typer.Option(min=0, help="First scenario index of the stream")] = 0,
    soak_runs: Annotated[int, typer.Option("--soak-runs", "--healthy-runs", min=0,
                                           help="Fault-free soaks")] = 2,
    soak_seconds: Annotated[float, typer.Option("--soak-seconds", "--healthy-seconds", min=10,
                                                help="Length of each soak")] = 600.0,
    workers: Annotated[int, typer.Option(min=1, help="Processes replaying scenarios")] = 2,
    out: Annotated[Path | None, typer.Option(help="Also save the summary as JSON here")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
) -> None:
    """Replay scenarios (held-out shapes and seeds by default) and print the scores.

    Every scenario goes simulator -> bus -> RCA; the RCA sees telemetry only. With
    several faults a scenario counts as right only when every fault is named; faults
    no telemetry can see are counted apart. Shares carry 95% Wilson intervals.
    Example: [bold]fabricops rca eval --scenarios 120 --faults 2 --out eval.json[/bold]
    """
    from fabricops.evaluation.evaluate import run, summary
    from fabricops.evaluation.scenarios import (
        FAMILIES,
        ScenarioSpec,
        shape_params,
        topology_for,
    )

    with user_errors():
        try:
            RcaModel.load(model)
        except ModelError as exc:
            raise fail(str(exc)) from None
        bad = sorted(set(family or ()) - set(FAMILIES))
        if bad:
            raise fail(f"unknown topology family {', '.join(bad)}; known: {', '.join(FAMILIES)}")
        spec = ScenarioSpec.model_validate({
            "split": split, "families": tuple(family or FAMILIES), "sizes": tuple(size or ()),
            "oversubscription": tuple(oversubscription or ()), "faults": faults,
            "during_flap": during_flap, "fault_types": tuple(fault_type or ())})
        if not spec.shapes():
            raise fail("no fabric shape matches the chosen families, sizes and "
                       "oversubscriptions")
        for shape in spec.shapes():  # a shape that cannot be built is named before any run
            topology_for(shape[0], shape_params(*shape))
        setup = {"model": str(model), "spec": spec.model_dump(mode="json"), "seed": seed,
                 "first": first, "scenarios": scenarios, "soak_runs": soak_runs,
                 "soak_seconds": soak_seconds, "shapes": [list(s) for s in spec.shapes()]}
        started = time.perf_counter()
        with progress_bar("evaluating") as update:
            result = summary(run(model, scenarios, spec=spec, first=first, seed=seed,
                                 soak_runs=soak_runs, soak_s=soak_seconds, workers=workers,
                                 progress=update), setup=setup)
        result["setup"]["seconds"] = round(time.perf_counter() - started, 1)
        if out is not None:
            out.write_text(json.dumps(result, indent=2))
        if as_json:
            typer.echo(json.dumps(result, indent=2))
            return
        console = stdout_console()
        for table in (methods_table(result), types_table(result), shapes_table(result),
                      soaks_table(result), reliability_table(result)):
            if table is not None:
                console.print(table)
        met, missed = targets_met(result)
        console.print(f"targets met: {len(met)}/{len(met) + len(missed)} "
                      f"({', '.join(met) or 'none'}); missed: {', '.join(missed) or 'none'}")
        if out is not None:
            console.print(f"summary saved to {out}")
