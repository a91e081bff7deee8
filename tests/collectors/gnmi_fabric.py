"""A simulated fabric served by a gNMI target, keeping every frame it published."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fabricops.core.frame import Frame
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.driver import DriverConfig, SimulationDriver
from fabricops.simulator.agents.gnmi_target import GnmiTarget, GnmiTargetConfig
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec

SPEED = 20.0


class RecordingBoard(FrameBoard):
    """A FrameBoard that keeps every frame published on it, by (device, timestamp)."""

    def __init__(self) -> None:
        super().__init__()
        self.published: dict[tuple[str, int], Frame] = {}

    def publish(self, frames: list[Frame]) -> None:
        for frame in frames:
            self.published[(frame.device, frame.ts_ns)] = frame
        super().publish(frames)


@dataclass
class Fabric:
    """A running simulated fabric served by a gNMI target, with every frame it published."""

    board: RecordingBoard
    driver: SimulationDriver
    target: GnmiTarget

    @property
    def published(self) -> dict[tuple[str, int], Frame]:
        return self.board.published


@contextmanager
def serving(config: GnmiTargetConfig | None = None) -> Iterator[Fabric]:
    topo = leaf_spine(gpus=64)
    sim = Simulator(topo, SimConfig(seed=11))
    sim.add_job(JobSpec(hosts=8, placement="random", compute_s=0.0, comm_bytes_per_nic=1e15))
    board = RecordingBoard()
    driver = SimulationDriver(sim, board, DriverConfig(speed=SPEED))
    target = GnmiTarget(config or GnmiTargetConfig(), board, [n.id for n in topo.switches()])
    fab = Fabric(board, driver, target)
    driver.start()
    target.start()
    try:
        yield fab
    finally:
        target.stop()
        driver.stop()
