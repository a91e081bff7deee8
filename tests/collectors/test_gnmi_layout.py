"""A remembered notification layout packs and range-checks values as Frame.build and
Catalogue.out_of_range do, for every value a leaf can produce."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricops.collectors.gnmi_layout import Layout
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame, FrameError, Source

TS = 1_767_225_600_000_000_000
# a port's counter, gauges with and without limits, a state: each kind of check
METRICS = ("in_octets", "rx_power_dbm", "queue_depth_bytes", "temperature_c", "oper_status")
ENTITIES = ["sw:eth1", "sw:eth1", "sw:eth1", "sw:eth1", "sw:eth2"]
GOOD: list[Any] = [10, -2.5, 0.0, 41.5, 1]


def _built(values: list[Any]) -> Frame:
    ids = np.array([CATALOGUE.id_of(m) for m in METRICS], np.uint16)
    return Frame.build("sw", TS, Source.GNMI, 7, ENTITIES, ids, values)


LAYOUT = Layout(_built(GOOD))


@pytest.mark.parametrize("values", [
    GOOD,
    [2**64 - 1, 30.0, 1e12, -40.0, 7],  # at the edges
    [0, -1e9, -1.0, 1e6, 9],  # gauges and a state past their ranges
    [5, math.nan, math.inf, -math.inf, 0],  # non-finite gauges
    [5, 3, 2**70, 40, 2],  # ints where gauges belong, one beyond what a float keeps exact
    [5.0, 1.5, 0.0, 40.0, 2.0],  # integral floats where integers belong
])
def test_a_layout_packs_and_flags_what_a_built_frame_does(values: list[Any]) -> None:
    built = _built(values)
    again = LAYOUT.frame("sw", TS, 7, values)
    assert again == built
    assert not again.raw.flags.writeable
    assert LAYOUT.out_of_range(values) == np.flatnonzero(built.out_of_range()).tolist()


@pytest.mark.parametrize("values", [
    [-1, 0.0, 0.0, 40.0, 1],  # a negative counter
    [2**64, 0.0, 0.0, 40.0, 1],  # a counter past 64 bits
    [1.5, 0.0, 0.0, 40.0, 1],  # a fraction where an integer belongs
    [True, 0.0, 0.0, 40.0, 1],  # a bool is not a number here
    [1, 0.0, 0.0, 40.0, "up"],  # a string
    [1, 10**400, 0.0, 40.0, 1],  # an int no float holds
])
def test_a_layout_refuses_what_frame_build_refuses_with_its_message(values: list[Any]) -> None:
    with pytest.raises(FrameError) as built:
        _built(values)
    with pytest.raises(FrameError) as again:
        LAYOUT.frame("sw", TS, 7, values)
    assert str(again.value) == str(built.value)


def test_counters_without_a_narrower_range_are_not_checked_again() -> None:
    checked = {METRICS[i] for i, *_ in LAYOUT.checks}
    assert checked == set(METRICS) - {"in_octets"}


_ANY_VALUE = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(), st.booleans(),
    st.sampled_from([2**64 - 1, 2**64, -1, 0, 1, 10**400, 2**53 + 1, 2.0, math.inf, -math.inf,
                     math.nan]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_ANY_VALUE, min_size=len(METRICS), max_size=len(METRICS)))
def test_any_values_give_what_frame_build_gives(values: list[Any]) -> None:
    """For any values a leaf may carry, a layout's frame, flags and refusals are those
    of ``Frame.build`` and ``Catalogue.out_of_range``."""
    refused = []
    try:
        built = _built(values)
    except FrameError as exc:
        refused.append(str(exc))
    if refused:
        with pytest.raises(FrameError) as again:
            LAYOUT.frame("sw", TS, 7, values)
        assert str(again.value) == refused[0]
        return
    assert LAYOUT.frame("sw", TS, 7, values) == built
    assert LAYOUT.out_of_range(values) == np.flatnonzero(built.out_of_range()).tolist()
