"""Runs a simulator in real time (or faster) and publishes its frames to a board.

The driver owns the simulator: every other thread reaches it only through
``call``, which runs a function between two ticks (as a device's control plane
would apply a change between two samples), at once while the driver waits for
the next tick.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.engine import Simulator

T = TypeVar("T")


class DriverConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    speed: float = Field(default=1.0, gt=0, description="Simulated seconds per wall second")
    max_ticks: int | None = Field(default=None, ge=1, description="Stop after this many")


class SimulationDriver:
    """Steps ``sim`` on its own thread, ``tick_s / speed`` wall seconds per tick."""

    def __init__(self, sim: Simulator, board: FrameBoard, config: DriverConfig | None = None):
        self.sim = sim
        self.board = board
        self.config = config or DriverConfig()
        self._calls: queue.Queue[tuple[Callable[[Simulator], Any], Future[Any]]] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._hooks: list[Callable[[Simulator], object]] = []
        self.hook_errors = 0
        self.ticks = 0

    def add_tick_hook(self, hook: Callable[[Simulator], object]) -> None:
        """Run ``hook(sim)`` on the driver thread after every tick (an INT exporter, say).

        A hook that raises is counted in ``hook_errors``; the fabric keeps running.
        """
        self._hooks.append(hook)

    def start(self) -> None:
        """Simulate the first tick at once (so agents have data), then keep pace."""
        self._tick()
        self._thread = threading.Thread(target=self._run, name="sim-driver", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def call(self, fn: Callable[[Simulator], T], timeout_s: float = 10.0) -> T:
        """Run ``fn(sim)`` on the driver thread between ticks; return its result."""
        fut: Future[T] = Future()
        self._calls.put((fn, fut))
        return fut.result(timeout=timeout_s)

    def _tick(self) -> None:
        while not self._calls.empty():
            fn, fut = self._calls.get_nowait()
            try:
                fut.set_result(fn(self.sim))
            except Exception as exc:  # handed to the caller, never kills the loop
                fut.set_exception(exc)
        self.sim.step()
        self.board.publish(self.sim.frames())
        for hook in self._hooks:
            try:
                hook(self.sim)
            except Exception:
                self.hook_errors += 1
        self.ticks += 1

    def _run(self) -> None:
        period = self.sim.config.tick_s / self.config.speed
        next_at = time.monotonic() + period
        while not self._stop.is_set():
            if self.config.max_ticks is not None and self.ticks >= self.config.max_ticks:
                self._drain_calls()
                continue
            while (left := next_at - time.monotonic()) > 0 and not self._stop.is_set():
                self._drain_calls(min(left, 0.05))  # calls run at once, between ticks
            if self._stop.is_set():
                break
            self._tick()
            next_at += period

    def _drain_calls(self, timeout_s: float = 0.05) -> None:
        try:
            fn, fut = self._calls.get(timeout=timeout_s)
        except queue.Empty:
            return
        try:
            fut.set_result(fn(self.sim))
        except Exception as exc:
            fut.set_exception(exc)
