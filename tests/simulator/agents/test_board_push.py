"""A running twin at 100 ms ticks pushes every tick's frames to its listeners, which a
FrameSampler turns into each device's own sampling interval."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fabricops.collectors.policy import FrameSampler, FrameSamplerConfig
from fabricops.core.frame import Frame
from fabricops.core.records import SamplingPolicy
from fabricops.core.sinks import ListSink
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.driver import DriverConfig, SimulationDriver
from fabricops.simulator.engine import Simulator

MS = 10**6


def test_every_100ms_tick_reaches_the_listeners_and_the_sampler_follows_its_policy(
    streaming: Callable[..., Simulator],
) -> None:
    sim = streaming(tick_s=0.1)
    t0 = sim.config.start_time_ns
    board = FrameBoard()
    ticks: list[int] = []
    sink = ListSink()
    sampler = FrameSampler(FrameSamplerConfig(interval_s=1.0), sink)
    sampler.apply_policy(SamplingPolicy(device="leaf-0", interval_s=0.1, ts_ns=t0))

    def broken(_: Sequence[Frame]) -> None:
        raise RuntimeError("collector bug")

    board.add_listener(broken)
    board.add_listener(lambda frames: ticks.append(frames[0].ts_ns))
    board.add_listener(sampler.offer)
    driver = SimulationDriver(sim, board, DriverConfig(speed=5.0, max_ticks=12))
    driver.start()
    try:
        board.wait_tick(11, timeout_s=10.0)
    finally:
        driver.stop()
    assert [(ts - t0) // MS for ts in ticks] == [100 * k for k in range(1, 13)]
    assert board.listener_errors == 12
    sent = {d: [(f.ts_ns - t0) // MS for f in sink.frames if f.device == d]
            for d in ("leaf-0", "leaf-1")}
    assert sent["leaf-0"] == [100 * k for k in range(1, 13)]
    assert sent["leaf-1"] == [100, 1000]
