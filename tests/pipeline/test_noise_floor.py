"""The compression bench's noise floor: a lower bound no codec goes below, drawn without
changing the data it bounds."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
import zstandard
from scipy.stats import poisson

from fabricops.pipeline.keyframe import encode_block, gauge_bounds
from tests.pipeline.bench_modules import load_bench


@pytest.fixture(scope="module")
def bench() -> tuple[ModuleType, ModuleType]:
    return load_bench("noisy_telemetry"), load_bench("noise_floor")


def test_recording_the_draws_leaves_the_data_as_it_was(
        bench: tuple[ModuleType, ModuleType]) -> None:
    noisy, _ = bench
    shape = noisy.Shape(devices=2, ports=5, points=120)
    draws = noisy.Draws()
    plain = list(noisy.noisy_blocks(3, shape, 60))
    recorded = list(noisy.noisy_blocks(3, shape, 60, draws))
    assert all(a == b for (_, a), (_, b) in zip(plain, recorded, strict=True))
    assert len(draws.devices) == 2
    assert draws.devices[0]["present"].shape == (5, len(noisy.METRICS), 120)
    assert (draws.devices[0]["in_octets"][:, 0] == 0).all()  # keyframes carry no noise


def test_poisson_bits_match_the_exact_entropy_and_rise_with_the_rate(
        bench: tuple[ModuleType, ModuleType]) -> None:
    _, floor = bench
    lam = np.array([1e-6, 0.05, 1.0, 30.0, 999.0, 1000.0, 5e4])
    bits = floor.poisson_bits(lam)
    for rate, got in zip(lam[:5].tolist(), bits[:5].tolist(), strict=True):
        k = np.arange(0, 3000)
        p = poisson.pmf(k, rate)
        exact = float(-(p[p > 0] * np.log2(p[p > 0])).sum())
        assert got == pytest.approx(exact, rel=1e-9, abs=1e-12)
    assert (np.diff(bits) > 0).all()  # the bound at 1,000 stays below the sum at 999
    normal = 0.5 * np.log2(2 * np.pi * np.e * lam[5:])
    assert ((bits[5:] < normal) & (bits[5:] > normal - 1e-3)).all()


def test_the_floor_is_below_every_codec_and_counts_only_stored_points(
        bench: tuple[ModuleType, ModuleType]) -> None:
    noisy, floor_of = bench
    shape = noisy.Shape(devices=2, ports=8, points=600)
    draws = noisy.Draws()
    blocks = [b for _, b in noisy.noisy_blocks(5, shape, 600, draws)]
    floor = floor_of.noise_floor(draws)
    samples = sum(int(b.present.sum()) for b in blocks)
    assert floor.samples == samples
    kf = sum(len(encode_block(b, gauge_bounds(b.metric))) for b in blocks) / samples
    zstd = sum(len(zstandard.ZstdCompressor(level=19).compress(b.ts_ns.tobytes()
                                                               + b.raw.tobytes()))
               for b in blocks) / samples
    assert 0.1 < floor.per_sample() < kf < zstd
    assert floor.bits["in_octets"] > floor.bits["in_pkts"] * 0.5 > 0
    # no point stored, no bits counted
    for noise in draws.devices:
        noise["present"][:] = False
    none = floor_of.noise_floor(draws)
    assert none.samples == 0
    assert sum(none.bits.values()) == 0
