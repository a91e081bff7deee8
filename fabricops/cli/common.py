"""Helpers shared by every command group: friendly errors, consoles, ``key=value``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

from fabricops.core.bus import BusError
from fabricops.core.inventory import InventoryError
from fabricops.core.topology import TopologyError
from fabricops.simulator.builders import BuilderError
from fabricops.simulator.faults import FaultError
from fabricops.simulator.runfile import RunFileError
from fabricops.simulator.scenario import ScenarioError

#: Errors that mean "your input is wrong", not "fabricops is broken".
USER_ERRORS: tuple[type[Exception], ...] = (
    ScenarioError, TopologyError, BuilderError, RunFileError, FaultError, InventoryError,
    BusError, ValueError, OSError,
)

#: Exit code for bad input, the same one Click uses for a bad command line.
EXIT_BAD_INPUT = 2


def fail(message: str) -> typer.Exit:
    """Print ``error: <message>`` (one line) to stderr; return the Exit to raise."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(EXIT_BAD_INPUT)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a bad-input exception into one ``error:`` line and exit code 2."""
    try:
        yield
    except USER_ERRORS as exc:
        raise fail(_message(exc)) from None


def _message(exc: Exception) -> str:
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
