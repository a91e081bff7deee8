"""The root ``fabricops`` command.

Each command lives in its own module, imported only when that command runs:
``fabricops --help`` and ``fabricops <command> --help`` load nothing else, so
they answer at once. ``COMMANDS`` names where each command is and what it does
in one line (the root's help shows these lines).
"""

from importlib import import_module
from typing import Annotated, Any

import typer
from typer import _click as click  # the Click that this Typer is built on
from typer.core import TyperCommand, TyperGroup

from fabricops import __version__

#: The epilog of the commands that run until stopped: what their exit codes mean.
EXIT_CODES = "fabricops.cli.common:EXIT_CODES_HELP"

#: name -> (module, attribute, one line for the root's help, "module:name" of its epilog)
COMMANDS: dict[str, tuple[str, str, str, str | None]] = {
    "up": ("fabricops.cli.up", "up",
           "Run everything on a simulated fabric (the embedded default).", EXIT_CODES),
    "collect": ("fabricops.cli.up", "collect",
                "Collect from the devices of an inventory and publish on the bus.", EXIT_CODES),
    "tail": ("fabricops.cli.tail", "tail", "Print the records of a bus topic as JSON.", None),
    "diagnose": ("fabricops.cli.diagnose", "diagnose",
                 "What is wrong now, where, how sure, and what was done.", None),
    "discover": ("fabricops.cli.discover", "discover",
                 "Learn the topology from LLDP; check the cabling against a plan.",
                 "fabricops.cli.discover:EPILOG"),
    "agent": ("fabricops.cli.agent", "agent",
              "Read a GPU server's NIC counters and publish them on the bus.", EXIT_CODES),
    "sim": ("fabricops.cli.sim", "app",
            "Simulate a fabric: topologies, scenarios, faults, run files.", None),
    "probes": ("fabricops.cli.probes", "app",
               "Plan INT probe flows that cover every link at low cost.", None),
    "query": ("fabricops.cli.query", "app",
              "Read stored series, latest values and key events.", None),
    "store": ("fabricops.cli.store", "app",
              "Maintain the store: merge old segments into fewer, smaller ones.", None),
    "rca": ("fabricops.cli.rca", "app",
            "Train and evaluate the root-cause model on simulated faults.", None),
    "actions": ("fabricops.cli.actions", "app",
                "Remediation actions: list, show, approve, reject, roll back.", None),
    "serve": ("fabricops.cli.serve", "app",
              "Run one component per process against Kafka and PostgreSQL.", None),
    "dashboards": ("fabricops.cli.dashboards", "app",
                   "Build Grafana dashboards as code, or push them to Grafana.", None),
    "config": ("fabricops.cli.config", "app",
               "Plan and render the RoCE configuration of a fabric.", None),
}


def load_command(name: str) -> click.Command:
    """The click command ``name`` of ``COMMANDS``, importing its module now."""
    module, attribute, _, epilog = COMMANDS[name]
    target = getattr(import_module(module), attribute)
    if isinstance(target, typer.Typer):
        group: click.Command = typer.main.get_group(target)
        group.name = name
        return group
    single = typer.Typer(rich_markup_mode="rich", add_completion=False)
    single.command(name, epilog=_text(epilog) if epilog else None)(target)
    command = typer.main.get_command(single)
    command.name = name
    return command


def _text(where: str) -> str:
    module, _, attribute = where.partition(":")
    return str(getattr(import_module(module), attribute))


class _Root(TyperGroup):
    """Lists commands from ``COMMANDS`` and loads one only to run it or show its help."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        if self._listing:
            return TyperCommand(cmd_name, short_help=COMMANDS[cmd_name][2],
                                help=COMMANDS[cmd_name][2])
        return load_command(cmd_name)

    def format_help(self, ctx: click.Context, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(name="fabricops", cls=_Root, no_args_is_help=True, rich_markup_mode="rich")


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
    from fabricops.cli.common import set_debug
    set_debug(debug)


if __name__ == "__main__":  # pragma: no cover
    app()
