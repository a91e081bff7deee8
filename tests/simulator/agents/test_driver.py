"""The driver keeps the board current and applies control calls between ticks."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.driver import DriverConfig, SimulationDriver
from fabricops.simulator.engine import Simulator


def test_board_follows_the_driver_and_calls_run_between_ticks(
    streaming: Callable[..., Simulator],
) -> None:
    board = FrameBoard()
    driver = SimulationDriver(streaming(), board, DriverConfig(speed=50.0))
    driver.start()
    try:
        assert board.tick >= 1
        assert "leaf-0" in board.devices()
        tick = board.wait_tick(board.tick, timeout_s=5.0)
        values = board.values("leaf-0")
        assert values is not None
        assert values.values[("leaf-0:eth1", "oper_status")] == 1
        assert isinstance(values.values[("leaf-0:eth1", "rx_power_dbm")], float)
        driver.call(lambda sim: sim.control.shut_port("leaf-0:eth33"))
        board.wait_tick(tick + 2, timeout_s=5.0)
        after = board.values("leaf-0")
        assert after is not None
        assert after.values[("leaf-0:eth33", "oper_status")] == 2
        with pytest.raises(ValueError, match="does not exist"):
            driver.call(lambda sim: sim.control.shut_port("leaf-0:eth999"))
    finally:
        driver.stop()


def test_tick_hooks_run_after_each_tick_and_cannot_stop_the_fabric(
    streaming: Callable[..., Simulator],
) -> None:
    board = FrameBoard()
    driver = SimulationDriver(streaming(), board, DriverConfig(speed=100.0))
    seen: list[float] = []

    def broken(_: Simulator) -> None:
        raise RuntimeError("exporter bug")

    driver.add_tick_hook(broken)
    driver.add_tick_hook(lambda sim: seen.append(sim.time_s))
    driver.start()
    try:
        board.wait_tick(3, timeout_s=5.0)
    finally:
        driver.stop()
    assert seen[:3] == [1.0, 2.0, 3.0]
    assert driver.hook_errors == len(seen)
