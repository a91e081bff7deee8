"""How a command that runs until stopped (``up``, ``collect``, ``serve *``) starts,
waits and ends.

``running_command`` hands the command a ``Running``: the process's metrics
registry, its ``Liveness`` (gauge ``fabricops_worker_up`` on that registry)
and the stack of what it has started. However the command ends, everything
started is stopped, newest first, so no thread, server or socket is left
behind, and the exit code says how it ended (``EXIT_CODES_HELP``):

* a start-up error (``startup_errors()``) prints one ``error:`` line naming the
  flag or file and exits 2;
* a worker that gave up prints ``error: worker <name> stopped: <reason>`` and
  exits 3;
* anything else prints one line and exits 1.

The error line is printed once everything is stopped, so it is the last line
whatever the parts log while stopping.

Once started, the command's heap is settled (:mod:`fabricops.core.heap`): the
collector no longer scans what start-up built.

Under ``fabricops --debug`` errors other than a dead worker keep their
traceback. SIGINT and SIGTERM, from the start on, ask for a clean stop.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

import typer
from prometheus_client import CollectorRegistry

from fabricops.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_WORKER_DIED,
    debug_enabled,
    error_message,
    say_error,
)
from fabricops.cli.preflight import startup_errors
from fabricops.core import heap
from fabricops.core.liveness import Liveness, WorkerState

#: How often the wait loop looks at the clock, signals and the status line, s.
POLL_S = 0.5
#: Exit code after SIGINT during start-up, as a shell reports it.
EXIT_INTERRUPTED = 130


class WorkerDiedError(Exception):
    """A worker of the process gave up; the message names each dead one and why."""

    def __init__(self, dead: Sequence[WorkerState]) -> None:
        self.dead = tuple(dead)
        super().__init__("; ".join(f"worker {w.name} stopped: {w.reason or 'no reason given'}"
                                   for w in self.dead))


class Running:
    """What a long-running command has started, and the book of its workers.

    ``started(stop)`` records how to stop a thing once it has started; ``stop``
    calls every recorded stop once, newest first, even if one before failed.
    ``stop_requested`` is set by SIGINT or SIGTERM.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.liveness = Liveness(registry)
        self.stop_requested = threading.Event()
        self._stops: list[Callable[[], object]] = []

    def started(self, stop: Callable[[], object]) -> None:
        self._stops.append(stop)

    def stop(self) -> list[Exception]:
        """Stop everything started; the errors the stops raised, in the order met."""
        errors: list[Exception] = []
        while self._stops:
            try:
                self._stops.pop()()
            except Exception as exc:
                errors.append(exc)
        return errors


def wait_for_stop(liveness: Liveness, stop: threading.Event, duration_s: float,
                  tick: Callable[[float], None] | None = None,
                  poll_s: float = POLL_S) -> list[WorkerState]:
    """Wait until ``stop`` is set, ``duration_s`` wall seconds pass (0: no limit) or a
    worker of ``liveness`` dies, calling ``tick(wall_s)`` every ``poll_s``.

    Returns the dead workers, or an empty list when it stopped as asked.
    """
    started = time.monotonic()
    while not stop.is_set():
        dead = liveness.wait_for_death(poll_s)
        if dead:
            return dead
        wall = time.monotonic() - started
        if tick is not None:
            tick(wall)
        if duration_s and wall >= duration_s:
            break
    return []


def serve_until_stopped(running: Running, duration_s: float,
                        tick: Callable[[float], None] | None = None) -> None:
    """The main wait of a command: returns when stopped as asked (signal, duration);
    raises WorkerDiedError when a worker gave up. What the command built to start
    is settled first (``heap.settle``)."""
    heap.settle()
    dead = wait_for_stop(running.liveness, running.stop_requested, duration_s, tick)
    if dead:
        raise WorkerDiedError(dead)


@contextmanager
def running_command(registry: CollectorRegistry | None = None) -> Iterator[Running]:
    """A ``Running`` for the body of a command; see the module docstring."""
    running = Running(registry if registry is not None else CollectorRegistry())
    restore = _catch_stop_signals(running.stop_requested)
    try:
        try:
            yield running
        except BaseException as exc:
            outcome = _outcome(exc)
            running.stop()  # what the parts log while stopping comes before the error
            if outcome is None:
                raise
            line, end = outcome
            if line:
                say_error(line)
            raise end from None
        errors = running.stop()
        if errors:
            if debug_enabled():
                raise errors[0]
            say_error(f"while stopping: {_described(errors[0])}")
            raise typer.Exit(EXIT_INTERNAL)
    finally:
        restore()


def _outcome(exc: BaseException) -> tuple[str, typer.Exit] | None:
    """The error line to print (maybe empty) and the Exit that end the command after
    ``exc``, or None to let ``exc`` propagate as it is."""
    if isinstance(exc, typer.Exit | typer.Abort):
        return None
    if isinstance(exc, WorkerDiedError):
        return str(exc), typer.Exit(EXIT_WORKER_DIED)
    if isinstance(exc, KeyboardInterrupt):
        return "", typer.Exit(EXIT_INTERRUPTED)
    if not isinstance(exc, Exception) or debug_enabled():
        return None
    if isinstance(exc, startup_errors()):
        return error_message(exc), typer.Exit(EXIT_BAD_INPUT)
    return (f"{_described(exc)} (fabricops --debug shows the traceback)",
            typer.Exit(EXIT_INTERNAL))


def _described(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {error_message(exc)}"


def _catch_stop_signals(stop: threading.Event) -> Callable[[], None]:
    """Make SIGINT and SIGTERM set ``stop``; return what puts the old handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    return restore
