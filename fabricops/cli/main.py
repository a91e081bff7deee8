"""The root ``fabricops`` command; each command group is added from its own module."""

from typing import Annotated

import typer

from fabricops import __version__
from fabricops.cli import actions, config, dashboards, probes, query, rca, serve, serve_sim, sim
from fabricops.cli.agent import agent
from fabricops.cli.common import EXIT_CODES_HELP, set_debug
from fabricops.cli.diagnose import diagnose
from fabricops.cli.discover import EPILOG as DISCOVER_EPILOG
from fabricops.cli.discover import discover
from fabricops.cli.tail import tail
from fabricops.cli.up import collect, up

app = typer.Typer(
    name="fabricops",
    no_args_is_help=True,
    rich_markup_mode="rich",
)
app.command(epilog=EXIT_CODES_HELP)(up)
app.command(epilog=EXIT_CODES_HELP)(collect)
app.command()(tail)
app.command()(diagnose)
app.command(epilog=DISCOVER_EPILOG)(discover)
app.command(epilog=EXIT_CODES_HELP)(agent)
app.add_typer(sim.app, name="sim")
app.add_typer(probes.app, name="probes")
app.add_typer(query.app, name="query")
app.add_typer(rca.app, name="rca")
app.add_typer(actions.app, name="actions")
app.add_typer(serve.app, name="serve")
serve.app.command("sim", epilog=EXIT_CODES_HELP)(serve_sim.serve_sim)
app.add_typer(dashboards.app, name="dashboards")
app.add_typer(config.app, name="config")


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"fabricops {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True,
                     help="Print the fabricops version and exit."),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", envvar="FABRICOPS_DEBUG",
                     help="On an error, show its traceback too (default: one line)."),
    ] = False,
) -> None:
    """Telemetry and automated operations for RoCE fabrics that train large AI models.

    Start with the whole stack on a simulated fabric (512 GPUs, one job, a gray
    link), collected over SNMP, gNMI and INT:

        fabricops up --duration 60

    Or simulate a scenario offline and read its summary and run file:

        fabricops sim run --preset demo -o demo.run.gz
    """
    set_debug(debug)


if __name__ == "__main__":  # pragma: no cover
    app()
