"""``fabricops sim``: run the simulated RoCE fabric and look at what it recorded."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from fabricops.cli import render, sim_inject, sim_topology
from fabricops.cli.common import (
    AsJson,
    stderr_console,
    stderr_is_terminal,
    stdout_console,
    user_errors,
)
from fabricops.core.frame import Frame, decode_many
from fabricops.simulator.run import Progress as ProgressCallback
from fabricops.simulator.run import run_scenario
from fabricops.simulator.runfile import FRAMES, HEADER, TRUTH, RunFileError, records
from fabricops.simulator.scenario import Scenario, load_preset, load_scenario, preset_names

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Simulate a RoCE training fabric: build topologies, run scenarios with injected "
         "faults, and inspect the run files they write.",
)
app.add_typer(sim_topology.app, name="topology")
app.command("inject")(sim_inject.inject)

DEFAULT_PRESET = "demo"


def preset_description(text: str) -> str:
    """The leading ``#`` comment lines of a preset, joined into one sentence."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(x for x in lines if x)


def preset_descriptions() -> list[tuple[str, str]]:
    """(name, description) of every shipped preset, by name."""
    folder = resources.files("fabricops.simulator") / "presets"
    return [
        (name, preset_description((folder / f"{name}.yaml").read_text(encoding="utf-8")))
        for name in preset_names()
    ]


@app.command("presets")
def presets_cmd(as_json: AsJson = False) -> None:
    """List the scenarios shipped with fabricops, with what each one shows.

    Example, then run one of them:

        fabricops sim presets
        fabricops sim run --preset pfc-storm
    """
    with user_errors():
        items = preset_descriptions()
    if as_json:
        typer.echo(json.dumps([{"preset": name, "description": text} for name, text in items]))
        return
    render.presets(stdout_console(), items)


def choose_scenario(file: Path | None, preset: str | None) -> Scenario:
    """The scenario from a file, a preset, or the demo preset when given neither."""
    if file is not None and preset is not None:
        raise ValueError(f"give either a SCENARIO file ({file}) or --preset ({preset}), not both")
    if file is not None:
        return load_scenario(file)
    return load_preset(preset or DEFAULT_PRESET)


def override(scenario: Scenario, duration: float | None, seed: int | None) -> Scenario:
    """The scenario with ``--duration``/``--seed`` applied."""
    update: dict[str, Any] = {}
    if duration is not None:
        if not duration > 0:
            raise ValueError(f"--duration must be greater than 0 seconds (got {duration:g})")
        update["duration_s"] = duration
    if seed is not None:
        update["seed"] = seed
    return scenario.model_copy(update=update) if update else scenario


@contextmanager
def progress_bar(scenario: Scenario) -> Iterator[ProgressCallback | None]:
    """A progress callback drawing on stderr, or None when stderr is not a terminal."""
    if not stderr_is_terminal():
        yield None
        return
    columns = (
        TextColumn("[bold]{task.description}"), BarColumn(),
        MofNCompleteColumn(), TextColumn("ticks, {task.fields[sim]} simulated"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=stderr_console(), transient=True) as bar:
        task = bar.add_task(f"simulating {scenario.name}", total=scenario.ticks, sim="0 s")

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, sim=f"{done * scenario.tick_s:g} s")

        yield update


@app.command("run")
def run_cmd(
    scenario_file: Annotated[
        Path | None,
        typer.Argument(metavar="SCENARIO", show_default=False,
                       help="A scenario YAML file. Without it (and without --preset) the "
                            f"'{DEFAULT_PRESET}' preset runs."),
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option("--preset", "-p", show_default=False,
                     help="Run a shipped scenario instead (see: fabricops sim presets)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", show_default=False,
                     help="Write the run file here (telemetry + ground truth); a name "
                          "ending in .gz is compressed."),
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option("--duration", "-d", show_default=False,
                     help="Simulated seconds, instead of the scenario's duration_s."),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option("--seed", min=0, show_default=False,
                     help="Random seed, instead of the scenario's seed."),
    ] = None,
    telemetry_every: Annotated[
        int, typer.Option("--telemetry-every", min=1,
                          help="Write telemetry to the run file every N ticks."),
    ] = 1,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON on stdout, nothing else."),
    ] = False,
) -> None:
    """Simulate a scenario and summarize how the fabric and the jobs did.

    The summary shows the topology, how evenly the fabric links were used, which
    ports paused most (PFC), each job's throughput over time, and the injected
    faults. A progress bar is drawn on stderr when it is a terminal.

    Examples:

        fabricops sim run                          (the demo preset)
        fabricops sim run --preset pfc-storm -o storm.run.gz
        fabricops sim run my-scenario.yaml --duration 30 --seed 4 --json
    """
    with user_errors():
        scenario = override(choose_scenario(scenario_file, preset), duration, seed)
        with progress_bar(scenario) as progress:
            summary = run_scenario(scenario, output, telemetry_every=telemetry_every,
                                   progress=progress)
        disk = output.stat().st_size if output is not None else None
    if as_json:
        typer.echo(json.dumps(summary.to_dict()))
        return
    render.run_summary(stdout_console(), summary, disk)


@dataclass
class RunFileView:
    """What ``inspect`` reads from a run file in one pass."""

    header: dict[str, Any] | None = None
    truth: list[dict[str, Any]] = field(default_factory=list)
    ticks: int = 0
    frames: int = 0
    samples: int = 0
    picked: Frame | None = None
    picked_tick: int = -1
    devices_at_pick: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"ticks": self.ticks, "frames": self.frames, "samples": self.samples}


def scan_run_file(path: Path, device: str | None, tick: int | None) -> RunFileView:
    """Read a run file once: header, truth, counts, and ``device``'s frame at ``tick``."""
    view = RunFileView()
    for kind, payload in records(path):
        if kind == HEADER:
            view.header = json.loads(payload)
        elif kind == TRUTH:
            view.truth = json.loads(payload)
        elif kind == FRAMES:
            _add_tick(view, decode_many(payload), device, tick)
    if view.header is None:
        raise RunFileError(f"{path}: no header record")
    return view


def _add_tick(view: RunFileView, frames: list[Frame], device: str | None,
              tick: int | None) -> None:
    if device is not None and (tick is None or tick == view.ticks):
        view.picked = next((f for f in frames if f.device == device), None)
        view.picked_tick = view.ticks
        view.devices_at_pick = [f.device for f in frames]
    view.ticks += 1
    view.frames += len(frames)
    view.samples += sum(f.n_samples for f in frames)


def picked_frame(view: RunFileView, device: str, tick: int | None) -> Frame:
    """The chosen frame, or a ValueError saying why there is none."""
    if view.ticks == 0:
        raise ValueError("the run file has no telemetry ticks")
    if tick is not None and tick >= view.ticks:
        raise ValueError(f"--tick {tick} is out of range: the run file has {view.ticks} "
                         f"ticks (0 to {view.ticks - 1})")
    if view.picked is None:
        known = ", ".join(view.devices_at_pick[:20])
        more = ", ..." if len(view.devices_at_pick) > 20 else ""
        raise ValueError(f"device {device!r} has no frame at tick {view.picked_tick}; "
                         f"devices: {known}{more}")
    return view.picked


@app.command("inspect")
def inspect_cmd(
    runfile: Annotated[
        Path, typer.Argument(metavar="RUNFILE", show_default=False,
                             help="A run file written by 'fabricops sim run -o'."),
    ],
    device: Annotated[
        str | None,
        typer.Option("--device", show_default=False,
                     help="Show this device's telemetry frame (e.g. leaf-0, host-003)."),
    ] = None,
    tick: Annotated[
        int | None,
        typer.Option("--tick", min=0, show_default=False,
                     help="Which tick (0 = first) for --device; default the last one."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead.")] = False,
) -> None:
    """Show what a run file holds: header, counts, ground truth, or a frame.

    With --device, also print that device's telemetry frame at one tick
    (every sample: entity, metric, value).

    Examples:

        fabricops sim inspect demo.run.gz
        fabricops sim inspect demo.run.gz --device leaf-0 --tick 40
        fabricops sim inspect demo.run.gz --device host-003 --json
    """
    with user_errors():
        view = scan_run_file(runfile, device, tick)
        chosen = picked_frame(view, device, tick) if device is not None else None
    if as_json:
        doc = chosen.to_json_dict() if chosen is not None else {
            "header": view.header, **view.counts(), "truth": view.truth}
        typer.echo(json.dumps(doc))
        return
    console = stdout_console()
    render.run_header(console, view.header or {}, view.counts())
    render.faults(console, view.truth)
    if chosen is not None:
        render.frame(console, chosen, view.picked_tick)
