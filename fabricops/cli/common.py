"""Helpers shared by every command group: friendly errors, consoles, ``key=value``."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

#: Errors that mean "your input is wrong", not "fabricops is broken": (module, class).
#: Looked up when an error is raised, so that a command imports only what it uses.
_USER_ERRORS = (
    ("fabricops.simulator.scenario", "ScenarioError"), ("fabricops.core.topology",
    "TopologyError"), ("fabricops.simulator.builders", "BuilderError"),
    ("fabricops.simulator.runfile", "RunFileError"), ("fabricops.simulator.faults",
    "FaultError"), ("fabricops.core.inventory", "InventoryError"),
    ("fabricops.core.bus", "BusError"))


def user_error_types() -> tuple[type[Exception], ...]:
    """The exception types that mean bad input, among the modules loaded now (an
    exception of a module not loaded cannot have been raised)."""
    found: list[type[Exception]] = [ValueError, OSError]
    for module, name in _USER_ERRORS:
        loaded = sys.modules.get(module)
        if loaded is not None:
            found.append(getattr(loaded, name))
    return tuple(found)

#: The option of every listing command that prints JSON for scripts instead of a table.
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]

#: Exit code of an unexpected failure (a bug); ``fabricops --debug`` shows its traceback.
EXIT_INTERNAL = 1
#: Exit code for bad input, the same one Click uses for a bad command line.
EXIT_BAD_INPUT = 2
#: Exit code of a long-running command one of whose workers gave up.
EXIT_WORKER_DIED = 3

#: The ``--help`` epilog of every command that runs until stopped.
EXIT_CODES_HELP = (
    "Exit codes: 0 stopped as asked (Ctrl-C, SIGTERM or --duration); "
    "1 an unexpected failure (fabricops --debug shows its traceback); "
    "2 a bad flag or file, or a port, broker or database that cannot be used at start; "
    "3 a worker died (stderr names it and why).")

_debug = False


def set_debug(on: bool) -> None:
    """Whether errors re-raise with their traceback (``fabricops --debug``)."""
    global _debug
    _debug = on
    configure_logging(on)


def configure_logging(debug: bool) -> None:
    """Log lines on stderr as ``time level logger: message``, warnings and up (info and
    up with ``--debug``). The Kafka client library's own lines (one per failed request
    while a broker is away) are kept for ``--debug``: the bus logs an outage itself,
    once when it starts and once when it ends."""
    logging.basicConfig(level=logging.INFO if debug else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.DEBUG if debug else logging.CRITICAL)


def debug_enabled() -> bool:
    """True under ``fabricops --debug``: errors keep their traceback."""
    return _debug


def say_error(message: str) -> None:
    """Print ``error: <message>`` to stderr, on one line whatever ``message`` holds."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    """Print ``error: <message>`` (one line) to stderr; return the Exit to raise."""
    say_error(message)
    return typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a bad-input exception into one ``error:`` line and exit code 2 (under
    ``--debug`` it propagates with its traceback)."""
    try:
        yield
    except Exception as exc:
        if not isinstance(exc, user_error_types()) or debug_enabled():
            raise
        raise fail(error_message(exc)) from None


def error_message(exc: BaseException) -> str:
    """The cause ``exc`` states, for an ``error:`` line (OSError: file and reason)."""
    if isinstance(exc, ValidationError):
        from fabricops.api.alert_config import describe_validation
        return describe_validation(exc)
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror}"
    return str(exc) or type(exc).__name__


def stdout_console() -> Console:
    """A console on the current stdout (made per call so test runners capture it)."""
    return Console(file=sys.stdout)


def stderr_console() -> Console:
    """A console on the current stderr, for progress and diagnostics."""
    return Console(file=sys.stderr)


def stderr_is_terminal() -> bool:
    """True when stderr is an interactive terminal (progress bars only then)."""
    return sys.stderr.isatty()


def parse_value(text: str) -> int | float | str:
    """``"512"`` -> 512, ``"2.5"`` -> 2.5, anything else stays a string."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def parse_assignments(items: list[str], option: str = "--set") -> dict[str, int | float | str]:
    """Parse ``["gpus=512", "oversubscription=3"]`` into a dict of typed values."""
    out: dict[str, int | float | str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} {item!r} is not of the form key=value")
        out[key.strip()] = parse_value(value.strip())
    return out


@contextmanager
def progress_bar(what: str) -> Iterator[Callable[[int, int], None]]:
    """A transient progress bar on stderr; yields ``update(done, total)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress("[progress.description]{task.description}", BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn(), console=stderr_console(),
                   transient=True)
    task = bar.add_task(what, total=None)
    with bar:
        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
        yield update
