"""Recorded ethtool output to values: ``ethtool -S <if>`` and ``ethtool -m <if>``.

Pure functions. ``parse_statistics`` reads the ``NIC statistics:`` listing, one
``name: value`` per line (names may carry a queue prefix such as ``[0]:`` on
bnxt_en, which stays part of the name). A line that is not ``name: integer``
is a ``garbage`` problem and is skipped; a value past 2**64-1 is
``out_of_range``; a last line without its newline was cut short (``truncated``)
and is skipped; the rest of the listing is kept.

``parse_module`` reads the transceiver diagnostics of ``ethtool -m``: module
temperature, and the receive and transmit optical power of every lane (the
weakest lane is the port's value, as a dark lane breaks the link). Alarm and
warning thresholds are not readings and are ignored.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Final

from fabricops.agent.values import U64_MAX, Problem, Reason

HEADER: Final = "NIC statistics:"
DARK_DBM: Final = -60.0  # a lane that receives (or sends) no light at all
_STAT: Final = re.compile(r"(\S.*?):\s+(-?\d+)")
_KEY_VALUE: Final = re.compile(r"\s*([^:]+?)\s*:\s*(.*)")
_MW: Final = re.compile(r"(-?\d+(?:\.\d+)?)\s*mW")
_DBM: Final = re.compile(r"(-?\d+(?:\.\d+)?|-inf)\s*dBm")
_CELSIUS: Final = re.compile(r"(-?\d+(?:\.\d+)?)\s*degrees C")
_RX_POWER: Final = re.compile(
    r"(rcvr signal avg optical power|receiver signal average optical power|"
    r"receiver signal optical power|rx power)", re.IGNORECASE)
_TX_POWER: Final = re.compile(r"(transmit avg optical power|laser output power|tx power)",
                              re.IGNORECASE)
_NOT_READING: Final = re.compile(r"threshold|alarm|warning", re.IGNORECASE)


@dataclass
class Statistics:
    """What one ``ethtool -S`` listing held: values by name, and what could not be read."""

    values: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def parse_statistics(text: str | None, where: str) -> Statistics:
    """An ``ethtool -S`` listing (see the module docstring)."""
    out = Statistics()
    if text is None:
        out.problems.append(Problem(where, Reason.MISSING))
        return out
    if not text.strip():
        out.problems.append(Problem(where, Reason.TRUNCATED, "empty"))
        return out
    lines = text.split("\n")
    complete, tail = lines[:-1], lines[-1]
    if tail.strip():
        out.problems.append(Problem(where, Reason.TRUNCATED, f"last line {tail[:40]!r}"))
    body = [ln for ln in complete if ln.strip()]
    if not body or body[0].strip() != HEADER:
        out.problems.append(Problem(where, Reason.GARBAGE, f"no {HEADER!r} header"))
        return out
    for line in body[1:]:
        m = _STAT.fullmatch(line.strip())
        if m is None:
            out.problems.append(Problem(where, Reason.GARBAGE, f"line {line.strip()[:40]!r}"))
            continue
        name, value = m.group(1), int(m.group(2))
        if not 0 <= value <= U64_MAX:
            out.problems.append(Problem(f"{where}:{name}", Reason.OUT_OF_RANGE, str(value)))
            continue
        out.values[name] = value
    return out


@dataclass
class ModuleReadings:
    """Transceiver diagnostics: each None when the module does not report it."""

    temperature_c: float | None = None
    rx_power_dbm: float | None = None
    tx_power_dbm: float | None = None
    problems: list[Problem] = field(default_factory=list)


def _dbm(value: str) -> float | None:
    """The dBm figure ethtool prints beside the mW one (more digits), else from the mW."""
    d = _DBM.search(value)
    if d is not None:
        return DARK_DBM if d.group(1) == "-inf" else max(float(d.group(1)), DARK_DBM)
    m = _MW.search(value)
    if m is None:
        return None
    mw = float(m.group(1))
    return 10.0 * math.log10(mw) if mw > 0 else DARK_DBM


def parse_module(text: str | None, where: str) -> ModuleReadings:
    """An ``ethtool -m`` listing (see the module docstring); lanes reduce to the weakest."""
    out = ModuleReadings()
    if text is None:
        return out
    rx: list[float] = []
    tx: list[float] = []
    for line in text.splitlines():
        m = _KEY_VALUE.fullmatch(line)
        if m is None or _NOT_READING.search(m.group(1)):
            continue
        key, value = m.group(1), m.group(2)
        if key.lower().startswith("module temperature"):
            t = _CELSIUS.search(value)
            if t is None:
                out.problems.append(Problem(where, Reason.GARBAGE, f"temperature {value[:40]!r}"))
            else:
                out.temperature_c = float(t.group(1))
            continue
        for pattern, lanes in ((_RX_POWER, rx), (_TX_POWER, tx)):
            if pattern.match(key):
                dbm = _dbm(value)
                if dbm is None:
                    out.problems.append(Problem(where, Reason.GARBAGE, f"{key}: {value[:40]!r}"))
                else:
                    lanes.append(dbm)
                break
    out.rx_power_dbm = min(rx) if rx else None
    out.tx_power_dbm = min(tx) if tx else None
    return out
