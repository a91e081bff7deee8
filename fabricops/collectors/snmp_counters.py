"""Counter continuity across polls: wraps carried, resets and discontinuities told apart.

``CounterTracker`` turns each counter of a device into one 64-bit series. A
Counter32 that went back by at least half its range since the previous poll has
wrapped and is carried past 2**32 (the rate across the wrap stays right). A
counter that goes back by less (or any Counter64 that goes back) is a reset. A
discontinuity the device announces is a reset too, never a wrap and never a
spike: ``sysUpTime`` going back (the agent restarted: every counter) or a port's
``ifCounterDiscontinuityTime`` moving (that port's counters). After a reset the
series restarts from the device's value. ``Discontinuity.between`` reads those
clocks from two polls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fabricops.core import snmp_mib as mib
from fabricops.core.snmp_mib import Oid

if TYPE_CHECKING:
    from fabricops.collectors.snmp_decode import Samples

U64 = npt.NDArray[np.uint64]
_HALF_32 = 1 << 31
Tables = Mapping[Oid, Mapping[Oid, int | bytes]]


@dataclass(frozen=True)
class Clocks:
    """The discontinuity clocks of one poll (TimeTicks; None where the agent has none)."""

    uptime: int | None = None
    table_last_change: int | None = None
    port_discontinuity: dict[int, int] = field(default_factory=dict)  # ifIndex -> ticks

    @classmethod
    def of(cls, tables: Tables) -> Clocks:
        def one(col: mib.Column) -> int | None:
            v = tables.get(col.oid, {}).get((0,))
            return v if isinstance(v, int) else None
        ports = {idx[0]: v for idx, v in tables.get(mib.IF_COUNTER_DISCONTINUITY.oid, {}).items()
                 if len(idx) == 1 and isinstance(v, int)}
        return cls(one(mib.SYS_UPTIME), one(mib.IF_TABLE_LAST_CHANGE), ports)


@dataclass(frozen=True)
class Discontinuity:
    """What changed between two polls' clocks."""

    restarted: bool = False  # sysUpTime went back: every counter restarted
    ports: frozenset[int] = frozenset()  # ifIndexes whose ifCounterDiscontinuityTime moved
    table_changed: bool = False  # ifTableLastChange moved: interfaces added or removed

    @classmethod
    def between(cls, before: Clocks | None, now: Clocks) -> Discontinuity:
        if before is None:
            return cls()
        restarted = before.uptime is not None and now.uptime is not None and \
            now.uptime < before.uptime
        ports = frozenset(i for i, t in now.port_discontinuity.items()
                          if before.port_discontinuity.get(i, t) != t)
        changed = before.table_last_change != now.table_last_change
        return cls(restarted, ports, changed)

    @property
    def redescribe(self) -> bool:
        """True when the device's description may no longer hold."""
        return self.restarted or self.table_changed


@dataclass(frozen=True)
class CounterUpdate:
    """Counters carried to 64 bits, and how many wrapped or reset since the last poll."""

    values: list[int | float]
    wraps: int
    resets: int


class CounterTracker:
    """Keeps one device's counters continuous across polls (see the module docstring)."""

    def __init__(self) -> None:
        self._keys: list[tuple[str, str]] = []
        self._last = np.zeros(0, np.uint64)
        self._total = np.zeros(0, np.uint64)

    def update(self, samples: Samples, restarted: bool = False,
               reset_entities: frozenset[str] = frozenset()) -> CounterUpdate:
        """Carry ``samples``' counters on from the previous poll; other values pass.

        ``restarted``: every counter restarted (the agent's sysUpTime went back);
        ``reset_entities``: entities whose counters the device says are discontinuous.
        """
        width = np.array(samples.widths, np.uint8)
        counter = np.flatnonzero(width > 0)
        keys = [(samples.entities[i], samples.metrics[i]) for i in counter.tolist()]
        raw = np.array([samples.values[i] for i in counter.tolist()], np.uint64)
        last, total, known = self._previous(keys)
        told = np.full(len(keys), restarted, bool)
        if reset_entities and not restarted:
            told = np.array([k[0] in reset_entities for k in keys], bool)
        told &= known
        back = known & ~told & (raw < last)
        wrap = back & (width[counter] == 32) & (last - raw >= _HALF_32)
        reset = (back & ~wrap) | told
        step = np.where(wrap, raw + np.uint64(1 << 32) - last, raw - last)
        total = np.where(known & ~reset, total + step, raw)
        self._keys, self._last, self._total = keys, raw, total
        values = list(samples.values)
        for i, v in zip(counter.tolist(), total.tolist(), strict=True):
            values[i] = v
        return CounterUpdate(values, int(wrap.sum()), int(reset.sum()))

    def _previous(self, keys: list[tuple[str, str]]) -> tuple[U64, U64, npt.NDArray[np.bool_]]:
        """Last raw value and 64-bit total per key, and which keys were seen before."""
        if keys == self._keys:
            return self._last, self._total, np.ones(len(keys), bool)
        where = {k: i for i, k in enumerate(self._keys)}
        pos = np.array([where.get(k, -1) for k in keys], np.int64)
        known = pos >= 0
        take = np.where(known, pos, 0)
        empty = np.zeros(len(keys), np.uint64)
        if not len(self._keys):
            return empty, empty, known
        return (np.where(known, self._last[take], 0).astype(np.uint64),
                np.where(known, self._total[take], 0).astype(np.uint64), known)


__all__ = ["Clocks", "CounterTracker", "CounterUpdate", "Discontinuity"]
