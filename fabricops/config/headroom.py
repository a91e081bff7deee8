"""PFC headroom: the buffer a lossless ingress queue keeps free once it asks its peer to pause.

After a receiver decides to pause a priority, bits keep arriving until the sender has
seen the PAUSE frame and stopped. They must fit in the headroom or the lossless class
drops them::

    headroom_bytes = ceil( (2 * L * d * R  +  R * t_resp) / 8  +  2 * MTU )

- ``L`` cable length in metres and ``d`` the propagation delay of the cable, about
  5 ns/m (signals travel at roughly 2/3 of the speed of light in both copper and
  fibre). ``2 * L * d * R`` are the bits of one round trip at line rate ``R`` (bit/s):
  those already on the wire towards the receiver when the PAUSE leaves, plus those the
  sender transmits while the PAUSE travels to it.
- ``2 * MTU``: a maximum-size frame the receiver is still taking in when it decides to
  pause, and one the sender has started when the PAUSE arrives (a frame is never cut).
- ``R * t_resp``: bits sent during the PFC response time, the time the receiver takes
  to emit the PAUSE plus the time the sender's MAC and PHY take to act on it (IEEE
  802.1Qbb bounds it per PHY type). ``t_resp`` is a policy input in nanoseconds.

Switch ASICs store frames in fixed-size cells, so a vendor's own number can be larger
than this physical minimum; the budget check in ``devices`` leaves room for that
through the share of the buffer that headroom may take.
"""

from __future__ import annotations

import math

#: One-way propagation delay of a data-centre cable, nanoseconds per metre.
PROPAGATION_NS_PER_M = 5.0


def headroom_bytes(*, speed_bps: int, mtu_bytes: int, cable_m: float, response_ns: float) -> int:
    """Bytes of PFC headroom one lossless priority needs on one port (formula above).

    >>> headroom_bytes(speed_bps=100_000_000_000, mtu_bytes=9100, cable_m=100, response_ns=0)
    30700
    """
    if speed_bps <= 0 or mtu_bytes <= 0 or cable_m < 0 or response_ns < 0:
        raise ValueError(
            f"headroom needs speed_bps > 0, mtu_bytes > 0, cable_m >= 0 and response_ns >= 0; "
            f"got {speed_bps}, {mtu_bytes}, {cable_m}, {response_ns}")
    round_trip_bits = 2 * cable_m * PROPAGATION_NS_PER_M * speed_bps / 1e9
    response_bits = speed_bps * response_ns / 1e9
    return math.ceil(round((round_trip_bits + response_bits) / 8, 6)) + 2 * mtu_bytes
