"""The keyframe codec on the bench's realistically noisy telemetry: same seed, same
data; counters exact through its wraps and resets; gauges within their bounds."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from fabricops.core.catalogue import CATALOGUE
from fabricops.pipeline.keyframe import decode_block, encode_block, gauge_bounds
from tests.pipeline.bench_modules import load_bench


@pytest.fixture(scope="module")
def noisy() -> ModuleType:
    return load_bench("noisy_telemetry")


def test_same_seed_same_data_other_seed_other_data(noisy: ModuleType) -> None:
    shape = noisy.Shape(devices=2, ports=3, points=50)
    a, b, c = (list(noisy.noisy_blocks(s, shape, 25)) for s in (7, 7, 8))
    assert [d for d, _ in a] == ["leaf-0-0"] * 2 + ["leaf-0-1"] * 2
    assert all(x == y for (_, x), (_, y) in zip(a, b, strict=True))
    assert any(x != y for (_, x), (_, y) in zip(a, c, strict=True))
    assert a[0][1].raw.shape == (3 * len(noisy.METRICS), 25)


def test_noisy_blocks_round_trip_with_wraps_resets_and_bounds(noisy: ModuleType) -> None:
    shape = noisy.Shape(devices=8, ports=13, points=300)
    drops = sizes_v1 = sizes_v2 = 0
    for _, block in noisy.noisy_blocks(1, shape, 300):
        bounds = gauge_bounds(block.metric)
        gauge = CATALOGUE.is_float[block.metric]
        v1, v2 = encode_block(block, bounds, version=1), encode_block(block, bounds)
        sizes_v1, sizes_v2 = sizes_v1 + len(v1), sizes_v2 + len(v2)
        got = decode_block(v2)
        assert np.array_equal(got.raw[~gauge], block.raw[~gauge])
        assert np.array_equal(got.present, block.present)
        err = np.abs(got.raw[gauge].view(np.float64) - block.raw[gauge].view(np.float64))
        assert (err <= bounds[gauge][:, None]).all()
        rows = ~gauge & (block.metric != CATALOGUE.id_of("oper_status"))
        both = block.present[rows, 1:] & block.present[rows, :-1]
        fall = np.diff(block.raw[rows].astype(np.float64), axis=1) < 0
        drops += int((fall & both).sum())
    assert drops > 100
    assert sizes_v2 < 0.75 * sizes_v1
