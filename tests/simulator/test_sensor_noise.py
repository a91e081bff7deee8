"""Sensor noise cut from a pool: normal per port, independent from tick to tick."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.noise import MIN_POOL, SensorNoise


def test_a_ports_readings_are_standard_normal_and_independent_over_ticks() -> None:
    noise = SensorNoise(np.random.default_rng(3), n_ports=500)
    ticks = np.stack([noise.draw(500) for _ in range(2000)])  # ticks x ports
    per_port = ticks[:, 17]
    assert abs(per_port.mean()) < 0.1
    assert 0.9 < per_port.std() < 1.1
    lag1 = np.corrcoef(ticks[:-1].ravel(), ticks[1:].ravel())[0, 1]
    assert abs(lag1) < 0.02, "a reading does not follow from the last"
    across = np.corrcoef(ticks[:, :-1].ravel(), ticks[:, 1:].ravel())[0, 1]
    assert abs(across) < 0.02, "neighbouring ports do not move together"
    share_3sigma = float((np.abs(ticks) > 3.0).mean())
    assert 0.001 < share_3sigma < 0.005, "tails of a normal distribution (0.27 %)"


def test_draws_wrap_around_the_pool_are_read_only_and_bounded() -> None:
    noise = SensorNoise(np.random.default_rng(1), n_ports=10)
    sizes = {len(noise.draw(MIN_POOL - 1)) for _ in range(50)}  # most of these wrap
    assert sizes == {MIN_POOL - 1}
    for n in (5, MIN_POOL):  # a window of the pool, or (wrapping) two
        with pytest.raises(ValueError, match="read-only"):
            noise.draw(n).fill(0.0)
    with pytest.raises(ValueError, match="readings from a pool"):
        noise.draw(MIN_POOL + 1)


def test_the_twins_optics_wander_by_their_noise_and_the_same_seed_repeats() -> None:
    def tx_power(seed: int) -> np.ndarray:
        sim = Simulator(leaf_spine(gpus=64), SimConfig(seed=seed))
        rows = []
        for _ in range(200):
            sim.step()
            rows.append(sim.telemetry.gauge("tx_power_dbm").copy())
        return np.stack(rows)

    a = tx_power(4)
    assert np.array_equal(a, tx_power(4))
    spread = a.std(axis=0)
    assert 0.015 < float(np.median(spread)) < 0.025, "sigma 0.02 dB around each laser's level"
    assert not np.array_equal(a, tx_power(5))
