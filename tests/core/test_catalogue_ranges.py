"""The catalogue's plausible values: every metric has a range, checked exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fabricops.core.catalogue import CATALOGUE, U64_RANGE, MetricKind, ValueRange
from fabricops.core.snmp_mib import DARK_DBM


def test_every_counter_takes_any_u64_and_every_gauge_is_finite() -> None:
    for metric in CATALOGUE.metrics:
        if metric.kind is MetricKind.COUNTER:
            assert metric.valid == U64_RANGE
            assert 2**64 - 1 in metric.valid
            assert 2**64 not in metric.valid
            assert -1 not in metric.valid
            assert 1.5 not in metric.valid
        if metric.kind is MetricKind.GAUGE:
            for odd in (math.nan, math.inf, -math.inf):
                assert odd not in metric.valid, metric.name


@pytest.mark.parametrize(("name", "inside", "outside"), [
    ("oper_status", [1, 2, 7], [0, 8, 2**64 - 1]),
    ("temperature_c", [-60.0, 45.5, 200.0], [-60.5, 200.1, 1e9]),
    ("rx_power_dbm", [DARK_DBM, -70.0, -3.2, 30.0], [-101.0, 31.0]),
    ("tx_power_dbm", [0.0, 5.0], [40.0]),
    ("queue_depth_bytes", [0.0, 1e9], [-1.0]),
    ("rdma_tx_rate_bps", [0.0, 4e11], [-0.5]),
    ("hop_latency_ns", [0.0, 1e6], [-1.0]),
])
def test_ranges_of_states_and_gauges(name: str, inside: list[float], outside: list[float]
                                     ) -> None:
    valid = CATALOGUE.by_name(name).valid
    assert all(v in valid for v in inside)
    assert not any(v in valid for v in outside)


def test_a_range_holds_numbers_only() -> None:
    valid = ValueRange(0, 10)
    assert True not in valid
    assert "5" not in valid
    assert None not in valid
    assert str(valid) == "[0, 10]"


def test_out_of_range_of_columns_agrees_with_the_ranges() -> None:
    rng = np.random.default_rng(3)
    ids = np.array([m.id for m in CATALOGUE.metrics], np.uint16)
    for _ in range(20):
        values = rng.choice([0.0, 1.0, 7.0, 8.0, -1.0, 45.0, 250.0, -80.0, math.nan, math.inf],
                            len(ids))
        raw = np.where(CATALOGUE.is_float[ids], values.view(np.uint64),
                       np.abs(np.nan_to_num(values, posinf=9.0)).astype(np.uint64))
        expected = [
            (float(v) if CATALOGUE.is_float[i] else int(r)) not in CATALOGUE.by_id(i).valid
            for i, v, r in zip(ids.tolist(), values.tolist(), raw.tolist(), strict=True)]
        assert CATALOGUE.out_of_range(ids, raw).tolist() == expected
