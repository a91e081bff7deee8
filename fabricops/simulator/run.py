"""Running a scenario end to end: simulate, write the run file, summarize.

``run_scenario`` drives the simulator tick by tick, hands each tick's frames to
the run file (every ``telemetry_every`` ticks), reports progress through a
callback, and returns a ``RunSummary`` that a person can read: how evenly the
fabric links were used, which ports paused most, and each job's throughput
over time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fabricops.simulator.engine import Simulator
from fabricops.simulator.observe import TickObservation
from fabricops.simulator.runfile import RunWriter
from fabricops.simulator.scenario import Scenario, build_simulator

Progress = Callable[[int, int], None]


@dataclass
class JobWindow:
    """A job's throughput over one window of the run."""

    start_s: float
    end_s: float
    goodput_gbps_per_nic: float
    steps: int


@dataclass
class RunSummary:
    """What a run looked like, in an operator's terms."""

    scenario: str
    ticks: int
    simulated_s: float
    wall_s: float
    topology: dict[str, int]
    utilization: dict[str, float]  # over fabric (switch-to-switch) links, run average
    top_paused_ports: list[tuple[str, int]]
    jobs: dict[str, list[JobWindow]] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    run_file: str | None = None
    run_file_bytes: int = 0

    @property
    def speedup(self) -> float:
        """Simulated seconds per wall-clock second."""
        return self.simulated_s / max(self.wall_s, 1e-9)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "speedup": self.speedup}


class _Tally:
    """Accumulates per-tick observations into a summary without keeping them all."""

    def __init__(self, sim: Simulator, windows: int, ticks: int) -> None:
        fab = sim.fabric
        tx, rx = fab.ch_tx_node(), fab.ch_rx_node()
        self.fabric_ch = np.flatnonzero(~fab.node_is_host[tx] & ~fab.node_is_host[rx])
        self.util_sum = np.zeros(len(self.fabric_ch))
        self.n = 0
        self.per_window = max(1, -(-ticks // windows))
        self.goodput: list[np.ndarray] = []
        self.steps: list[np.ndarray] = []
        self.sim = sim

    def add(self, obs: TickObservation) -> None:
        cap = self.sim.fabric.ch_capacity_bps[self.fabric_ch]
        self.util_sum += obs.served_bps[self.fabric_ch] / cap
        self.n += 1
        self.goodput.append(obs.job_goodput_bps)
        self.steps.append(obs.job_steps)

    def utilization(self) -> dict[str, float]:
        u = self.util_sum / max(self.n, 1)
        if u.size == 0:
            return {}
        mean = float(u.mean())
        return {
            "mean": mean, "min": float(u.min()), "p50": float(np.percentile(u, 50)),
            "p99": float(np.percentile(u, 99)), "max": float(u.max()),
            "cv": float(u.std() / mean) if mean > 0 else 0.0,
        }

    def jobs(self, tick_s: float) -> dict[str, list[JobWindow]]:
        wl = self.sim.workload
        out: dict[str, list[JobWindow]] = {}
        for j, spec in enumerate(wl.specs):
            nics = max(1, wl.nic_count(j))
            rows = []
            for w in range(0, len(self.goodput), self.per_window):
                chunk = [g[j] for g in self.goodput[w:w + self.per_window]]
                before = self.steps[w - 1][j] if w > 0 else 0
                rows.append(JobWindow(
                    start_s=w * tick_s, end_s=(w + len(chunk)) * tick_s,
                    goodput_gbps_per_nic=float(np.mean(chunk)) / nics / 1e9,
                    steps=int(self.steps[w + len(chunk) - 1][j] - before),
                ))
            out[spec.name] = rows
        return out


def top_paused_ports(sim: Simulator, n: int = 10) -> list[tuple[str, int]]:
    """Ports with the most PFC pause frames sent and received, most first."""
    tel = sim.telemetry
    total = np.zeros(sim.fabric.n_ports, np.float64)
    for name in tel.counter_names:
        if name.startswith("pfc_"):
            total += tel.counter(name).astype(np.float64)
    order = np.argsort(-total, kind="stable")[:n]
    return [(sim.fabric.port_ids[i], int(total[i])) for i in order if total[i] > 0]


def run_scenario(
    scenario: Scenario,
    out: str | Path | None = None,
    *,
    telemetry_every: int = 1,
    windows: int = 10,
    progress: Progress | None = None,
) -> RunSummary:
    """Simulate ``scenario``; write its run file to ``out`` if given; summarize it."""
    sim = build_simulator(scenario)
    tally = _Tally(sim, windows, scenario.ticks)
    started = time.perf_counter()
    writer = RunWriter(out) if out is not None else None
    if writer is not None:
        with writer:
            writer.header(_header(scenario, sim))
            _loop(sim, scenario.ticks, tally, writer, telemetry_every, progress)
            writer.truth([g.model_dump(mode="json") for g in sim.ground_truth()])
    else:
        _loop(sim, scenario.ticks, tally, None, telemetry_every, progress)
    return RunSummary(
        scenario=scenario.name, ticks=scenario.ticks, simulated_s=sim.time_s,
        wall_s=time.perf_counter() - started, topology=sim.fabric.topology.summary(),
        utilization=tally.utilization(), top_paused_ports=top_paused_ports(sim),
        jobs=tally.jobs(scenario.tick_s),
        faults=[g.model_dump(mode="json") for g in sim.ground_truth()],
        run_file=None if out is None else str(out),
        run_file_bytes=0 if writer is None else writer.bytes_written,
    )


def _loop(sim: Simulator, ticks: int, tally: _Tally, writer: RunWriter | None, every: int,
          progress: Progress | None) -> None:
    for i in range(ticks):
        tally.add(sim.step())
        if writer is not None and i % every == 0:
            writer.frames(sim.frames())
        if progress is not None:
            progress(i + 1, ticks)


def _header(scenario: Scenario, sim: Simulator) -> dict[str, Any]:
    return {
        "scenario": scenario.model_dump(mode="json"),
        "topology": sim.fabric.topology.summary(),
        "start_time_ns": sim.config.start_time_ns,
    }
