"""Which workers of this process are alive, for ``/ready``, metrics and the exit code.

A worker (a consumer loop, a collector, a sender thread) registers under a
readable name and reports ``alive`` or ``dead(reason)``. A dead worker is one
that gave up: its loop ended and will not come back. ``/ready`` names it, the
gauge ``fabricops_worker_up{worker}`` drops to 0, and the command that runs
the process (``fabricops up``, ``serve``, ``collect``) exits non-zero with the
reason (``Liveness.wait_for_death``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge


@dataclass(frozen=True)
class WorkerState:
    """One worker: alive or not, and why it is not."""

    name: str
    alive: bool
    reason: str = ""


class Liveness:
    """A thread-safe book of workers; one per process."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._states: dict[str, WorkerState] = {}
        self._gauge = Gauge("fabricops_worker_up", "1 while a worker of this process runs, "
                            "0 once it has given up", ["worker"],
                            registry=registry if registry is not None else CollectorRegistry())

    def alive(self, name: str) -> None:
        self._set(WorkerState(name, True))

    def dead(self, name: str, reason: str) -> None:
        self._set(WorkerState(name, False, reason))

    def forget(self, name: str) -> None:
        """A worker stopped on purpose (shutdown): no longer counted either way."""
        with self._lock:
            known = self._states.pop(name, None) is not None
        if known:
            self._gauge.remove(name)

    def states(self) -> list[WorkerState]:
        with self._lock:
            return sorted(self._states.values(), key=lambda s: s.name)

    def dead_workers(self) -> list[WorkerState]:
        return [s for s in self.states() if not s.alive]

    def wait_for_death(self, timeout_s: float) -> list[WorkerState]:
        """Wait up to ``timeout_s`` for a worker to give up; the dead ones (may be empty)."""
        with self._changed:
            self._changed.wait_for(
                lambda: any(not s.alive for s in self._states.values()), timeout_s)
        return self.dead_workers()

    def _set(self, state: WorkerState) -> None:
        with self._changed:
            self._states[state.name] = state
            self._changed.notify_all()
        self._gauge.labels(state.name).set(1 if state.alive else 0)
