"""The PFC headroom formula: round trip on the cable, two frames, the response time."""

from __future__ import annotations

import pytest

from fabricops.config.headroom import headroom_bytes

G100 = 100_000_000_000


def test_worked_example_100g_100m() -> None:
    # 2 x 100 m x 5 ns/m x 100 Gb/s = 100,000 bits = 12,500 B; plus 2 x 9100 B.
    assert headroom_bytes(speed_bps=G100, mtu_bytes=9100, cable_m=100, response_ns=0) == 30_700


def test_response_time_adds_rate_times_time() -> None:
    base = headroom_bytes(speed_bps=G100, mtu_bytes=9100, cable_m=3, response_ns=0)
    slow = headroom_bytes(speed_bps=G100, mtu_bytes=9100, cable_m=3, response_ns=2400)
    assert slow - base == 30_000  # 2.4 us at 100 Gb/s


def test_cable_term_is_linear_in_length_and_rate() -> None:
    def cable_part(speed: int, metres: float) -> int:
        return headroom_bytes(speed_bps=speed, mtu_bytes=1500, cable_m=metres,
                              response_ns=0) - 3000

    assert cable_part(G100, 100) == 2 * cable_part(G100, 50)
    assert cable_part(4 * G100, 50) == 4 * cable_part(G100, 50)


def test_mtu_counts_twice() -> None:
    small = headroom_bytes(speed_bps=G100, mtu_bytes=1500, cable_m=10, response_ns=1000)
    jumbo = headroom_bytes(speed_bps=G100, mtu_bytes=9100, cable_m=10, response_ns=1000)
    assert jumbo - small == 2 * (9100 - 1500)


@pytest.mark.parametrize("bad", [{"speed_bps": 0}, {"mtu_bytes": -1}, {"cable_m": -1.0},
                                 {"response_ns": -5}])
def test_impossible_inputs_are_refused(bad: dict[str, float]) -> None:
    args: dict[str, float] = {"speed_bps": G100, "mtu_bytes": 9100, "cable_m": 3,
                              "response_ns": 0}
    args.update(bad)
    with pytest.raises(ValueError, match="headroom needs"):
        headroom_bytes(**args)  # type: ignore[arg-type]
