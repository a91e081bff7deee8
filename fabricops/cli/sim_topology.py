"""``fabricops sim topology``: build fabric topologies and check topology files."""

import inspect
import json
from pathlib import Path
from typing import Annotated

import typer

from fabricops.cli import render
from fabricops.cli.common import AsJson, parse_assignments, stdout_console, user_errors
from fabricops.core.topology import load_topology, save_topology
from fabricops.simulator.builders import BUILDERS, build

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Build fabric topologies (leaf-spine, fat-tree, rail-optimized) and check "
         "topology files.",
)



def _builder_params() -> str:
    """One line per builder naming the parameters it takes (for --help)."""
    lines = [
        f"{kind}: " + ", ".join(p for p in inspect.signature(fn).parameters if p != "name")
        for kind, fn in BUILDERS.items()
    ]
    return "Builder parameters:\n\n" + "\n\n".join(lines)


@app.command("build", epilog=_builder_params())
def build_cmd(
    kind: Annotated[
        str, typer.Argument(metavar="KIND", show_default=False,
                            help=f"Which builder: {', '.join(BUILDERS)}."),
    ],
    settings: Annotated[
        list[str] | None,
        typer.Option("--set", "-s", metavar="KEY=VALUE",
                     help="A builder parameter; repeat for more. Values are read as an "
                          "int, else a float, else a string (e.g. --set gpus=512)."),
    ] = None,
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Where to write it: .json for JSON, "
                     ".yaml/.yml for YAML."),
    ] = Path("topology.json"),
) -> None:
    """Build a topology with a builder and write it to a file.

    Each builder has a default for every parameter (see the list below); an
    unknown parameter or an impossible size is refused with the parameter
    named.

    Examples: a 512-GPU leaf-spine fabric with 3:1 oversubscription (JSON),
    and a k=8 fat-tree as YAML:

        fabricops sim topology build leaf_spine -s gpus=512 -s oversubscription=3
        fabricops sim topology build fat_tree --set k=8 -o fat-tree.yaml
    """
    with user_errors():
        params = parse_assignments(settings or [])
        topo = build(kind, **params)
        save_topology(topo, output)
    console = stdout_console()
    render.topology_summary(console, topo)
    console.print(f"Wrote {output}")


@app.command("show")
def show_cmd(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", show_default=False,
                             help="A topology file (.json, .yaml or .yml)."),
    ],
    links: Annotated[
        int, typer.Option("--links", "-l", min=0, help="Also list the first N links.")
    ] = 0,
    as_json: AsJson = False,
) -> None:
    """Validate a topology file and print what is in it.

    A broken file (a link to a port that does not exist, a port used twice,
    two hosts cabled together, ...) is refused with the bad element named,
    and exit code 2.

    Example, check a file and list its first 10 links:

        fabricops sim topology show fabric.yaml --links 10
    """
    with user_errors():
        topo = load_topology(file)
    if as_json:
        typer.echo(json.dumps({"name": topo.name, "kind": topo.kind, "params": topo.params,
                               "counts": topo.summary(),
                               "links": [[link.a, link.b] for link in topo.links[:links]]}))
        return
    console = stdout_console()
    render.topology_summary(console, topo)
    if links:
        render.topology_links(console, topo, links)
