"""One sysfs file's text to one value, or the reason it is not one.

Pure functions: text in (``None`` when the file does not exist), a value or a
:class:`Problem` out. A sysfs attribute is written whole by the kernel and
ends with a newline, so text without one was cut short (``truncated``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

U64_MAX: Final = 2**64 - 1
_INTEGER: Final = re.compile(r"-?\d+")
_IB_STATE: Final = re.compile(r"(\d+):\s*([A-Z_]+)")
_IB_RATE: Final = re.compile(r"(\d+(?:\.\d+)?)\s*Gb/sec")

#: /sys/class/net/<if>/operstate (RFC 2863 names) to IF-MIB ifOperStatus.
OPERSTATE: Final = {"up": 1, "down": 2, "testing": 3, "unknown": 4, "dormant": 5,
                    "notpresent": 6, "lowerlayerdown": 7}
#: /sys/class/infiniband/<dev>/ports/<n>/state: 4 (ACTIVE) is up, the rest down.
IB_ACTIVE: Final = 4


class Reason(StrEnum):
    """Why a reading gave no value; the label of the agent's problem counter."""

    MISSING = "missing"  # the file (or command output) is not there
    GARBAGE = "garbage"  # not the syntax the kernel writes
    TRUNCATED = "truncated"  # cut short: empty, or no final newline
    OUT_OF_RANGE = "out_of_range"  # a number outside what the value can be
    UNREADABLE = "unreadable"  # the read itself failed (permissions, I/O error)


@dataclass(frozen=True)
class Problem:
    """A reading that gave no value: where, why, and what was found."""

    where: str
    reason: Reason
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.where}: {self.reason.value}" + (f" ({self.detail})" if self.detail else "")


def _body(text: str | None, where: str) -> str | Problem:
    if text is None:
        return Problem(where, Reason.MISSING)
    if not text.endswith("\n"):
        return Problem(where, Reason.TRUNCATED, f"{text[:40]!r} has no final newline")
    body = text.strip()
    if not body:
        return Problem(where, Reason.TRUNCATED, "empty")
    return body


def parse_counter(text: str | None, where: str) -> int | Problem:
    """A counter file (``"1234\\n"``): an unsigned 64-bit integer."""
    body = _body(text, where)
    if isinstance(body, Problem):
        return body
    if not _INTEGER.fullmatch(body):
        return Problem(where, Reason.GARBAGE, f"{body[:40]!r} is not an integer")
    value = int(body)
    if not 0 <= value <= U64_MAX:
        return Problem(where, Reason.OUT_OF_RANGE, f"{value} is not in [0, 2**64-1]")
    return value


def parse_operstate(text: str | None, where: str) -> int | Problem:
    """``/sys/class/net/<if>/operstate`` as IF-MIB ifOperStatus (1 up, 2 down, ...)."""
    body = _body(text, where)
    if isinstance(body, Problem):
        return body
    state = OPERSTATE.get(body)
    if state is None:
        return Problem(where, Reason.GARBAGE, f"{body[:40]!r} is not an operstate")
    return state


def parse_ib_state(text: str | None, where: str) -> int | Problem:
    """An RDMA port's ``state`` (``"4: ACTIVE"``) as ifOperStatus: ACTIVE up, else down."""
    body = _body(text, where)
    if isinstance(body, Problem):
        return body
    m = _IB_STATE.fullmatch(body)
    if m is None:
        return Problem(where, Reason.GARBAGE, f"{body[:40]!r} is not '<n>: <STATE>'")
    code = int(m.group(1))
    if not 0 <= code <= 5:
        return Problem(where, Reason.OUT_OF_RANGE, f"port state {code} is not in [0, 5]")
    return OPERSTATE["up"] if code == IB_ACTIVE else OPERSTATE["down"]


def parse_ib_rate(text: str | None, where: str) -> float | Problem:
    """An RDMA port's ``rate`` (``"400 Gb/sec (4X NDR)"``) in bits/s."""
    body = _body(text, where)
    if isinstance(body, Problem):
        return body
    m = _IB_RATE.match(body)
    if m is None:
        return Problem(where, Reason.GARBAGE, f"{body[:40]!r} is not '<n> Gb/sec ...'")
    gbps = float(m.group(1))
    if not 0 < gbps <= 10_000:
        return Problem(where, Reason.OUT_OF_RANGE, f"{gbps:g} Gb/s is not in (0, 10000]")
    return gbps * 1e9


def parse_speed(text: str | None, where: str) -> float | Problem | None:
    """``/sys/class/net/<if>/speed`` in bits/s; None while the link is down (``-1``)."""
    body = _body(text, where)
    if isinstance(body, Problem):
        return body
    if not _INTEGER.fullmatch(body):
        return Problem(where, Reason.GARBAGE, f"{body[:40]!r} is not an integer")
    mbps = int(body)
    if mbps == -1:
        return None
    if not 0 < mbps <= 10_000_000:
        return Problem(where, Reason.OUT_OF_RANGE, f"{mbps} Mb/s is not in (0, 10^7]")
    return mbps * 1e6
