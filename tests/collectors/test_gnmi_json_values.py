"""A JSON leaf's usual value is read without read_value's checks, to the same number;
anything unusual is left to read_value, which accepts or refuses it as before."""

from __future__ import annotations

import math
from typing import Any

import pytest

from fabricops.collectors.gnmi_values import BadValueError, read_value, usual_json_number
from fabricops.core.catalogue import CATALOGUE

RAWS: list[Any] = [
    "12", "0012", "9999999999999999999", "18446744073709551615", "18446744073709551616",
    "-1", "1.5", "\u0661\u0662", " 7 ", "1_000", "", "nan", "inf", "-2.31", "1e400", "abc",
    5, -5, 0, 2**64 - 1, 2**64, 10**400, "1" * 400, True, False, 5.0, 2.5, -0.0,
    math.nan, math.inf, None,
    {"a": 1}, [1], b"12",
]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and type(a) is type(b))


@pytest.mark.parametrize(("metric", "fast"), [("in_octets", "uint_val"),
                                            ("rx_power_dbm", "double_val")])
@pytest.mark.parametrize("raw", RAWS, ids=repr)
def test_a_json_leaf_reads_as_read_value_reads_it(metric: str, fast: str, raw: Any) -> None:
    number = usual_json_number(raw, fast)
    try:
        expected = read_value(raw, CATALOGUE.by_name(metric), None)
    except BadValueError:
        assert number is None
        return
    assert number is None or _same(number, expected)


def test_the_usual_forms_take_the_short_way() -> None:
    assert usual_json_number("18446744073709551615"[:19], "uint_val") == 1844674407370955161
    assert usual_json_number(7, "uint_val") == 7
    assert usual_json_number("-2.31", "double_val") == -2.31
    assert usual_json_number(41, "double_val") == 41.0
    # left to read_value: a 20-digit string, a bool, a float counter
    assert usual_json_number("18446744073709551615", "uint_val") is None
    assert usual_json_number(True, "uint_val") is None
    assert usual_json_number(5.0, "uint_val") is None
