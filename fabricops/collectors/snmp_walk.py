"""Walking columns of one agent side by side, whatever the agent's answers look like.

``walk`` asks for every column in ``columns`` at once and follows each with its own
cursor until its rows end (an OID outside the column, an exception value, or no
progress). ``scalars`` (``sysUpTime``, ...) ride along in the first request, as
GETBULK non-repeaters or as extra GETNEXT OIDs. A request asks for at most
``max_varbinds`` varbinds (columns x repetitions); an agent that answers fewer
varbinds than asked (a capped or truncated response, cut mid-row or not) is walked
on from where each column's answer stopped, so nothing it sent is asked for again,
and is asked for no more varbinds than it answered from then on.
With GETNEXT (SNMPv1 agents, or ``walk: getnext``) each request moves every
cursor one row; an SNMPv1 ``noSuchName`` error ends the column it names and the
request is sent again without it. A ``tooBig`` error halves the request.
:class:`WalkStats` counts requests and varbinds asked and received.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from fabricops.collectors import snmp_pdu as pdu
from fabricops.collectors.snmp_pdu import Row
from fabricops.collectors.snmp_transport import AgentError, PollError
from fabricops.core.snmp_mib import Column, Oid

Request = Callable[[list[Oid], int, int, bool], Awaitable[list[Row]]]
"""Send one request: (OIDs, non-repeaters, max-repetitions, GETNEXT?) -> rows."""
WalkTables = dict[Oid, dict[Oid, int | bytes]]


@dataclass(frozen=True)
class WalkStats:
    """What one poll's walks cost: requests, varbinds asked for and received."""

    requests: int = 0
    varbinds_requested: int = 0  # the most varbinds the requests could bring back
    varbinds_received: int = 0
    columns: tuple[str, ...] = ()  # names of the columns and scalars asked for
    described: bool = False  # the walk read the device description too

    def __add__(self, other: WalkStats) -> WalkStats:
        return WalkStats(self.requests + other.requests,
                         self.varbinds_requested + other.varbinds_requested,
                         self.varbinds_received + other.varbinds_received,
                         self.columns + tuple(c for c in other.columns if c not in self.columns),
                         self.described or other.described)


@dataclass(frozen=True)
class WalkLimits:
    """How much one request may ask for."""

    max_repetitions: int = 32
    max_varbinds: int = 512
    max_rows_per_column: int = 100_000
    getnext: bool = False


async def walk(request: Request, columns: Sequence[Column], scalars: Sequence[Column],
               limits: WalkLimits, where: str = "SNMP target") -> tuple[WalkTables, WalkStats]:
    """Rows of ``columns`` and ``scalars`` (see the module docstring); PollError if a
    column has more than ``max_rows_per_column`` rows or the agent answers an error
    the walk cannot work around."""
    tables: WalkTables = {c.oid: {} for c in (*scalars, *columns)}
    cursor = {c.oid: c.oid for c in columns}
    pending = [c.oid for c in scalars]
    stats = WalkStats(columns=tuple(c.name for c in (*scalars, *columns)))
    budget = max(1, limits.max_varbinds)
    while cursor or pending:
        cols = list(cursor)[:max(1, budget - len(pending))]
        oids = pending + [cursor[c] for c in cols]
        reps = 1 if limits.getnext else max(1, min(limits.max_repetitions,
                                                   (budget - len(pending)) // max(1, len(cols))))
        try:
            rows = await request(oids, len(pending), reps, limits.getnext)
        except AgentError as exc:
            stats = replace(stats, requests=stats.requests + 1)
            budget = _recover(exc, oids, pending, cursor, budget, reps, len(cols))
            continue
        stats = replace(stats, requests=stats.requests + 1,
                        varbinds_requested=stats.varbinds_requested + len(pending) +
                        reps * len(cols), varbinds_received=stats.varbinds_received + len(rows))
        if rows and len(rows) < len(pending) + reps * len(cols):
            budget = len(rows)  # the most this agent answers: ask for no more
        answered = min(len(pending), len(rows))
        _take_scalars(tables, pending[:answered], rows)
        _take_rows(tables, cursor, cols, rows[answered:], not rows and not pending)
        pending = pending[answered:]
        if any(len(tables[c.oid]) > limits.max_rows_per_column for c in columns):
            raise PollError(f"{where}: a column has more than "
                            f"{limits.max_rows_per_column} rows", False)
    return tables, stats


def _recover(exc: AgentError, oids: list[Oid], pending: list[Oid], cursor: dict[Oid, Oid],
             budget: int, reps: int, n_cols: int) -> int:
    """Adjust the walk after an error-status; the new varbind budget, or re-raise."""
    if exc.status == pdu.NO_SUCH_NAME and 1 <= exc.index <= len(oids):
        gone = oids[exc.index - 1]
        if exc.index <= len(pending):
            pending.remove(gone)
        else:
            col = next(c for c, at in cursor.items() if at == gone)
            del cursor[col]
        return budget
    if exc.status == pdu.TOO_BIG and (reps > 1 or n_cols > 1):
        return max(1, (len(pending) + reps * n_cols) // 2)
    raise exc


def _take_scalars(tables: WalkTables, pending: list[Oid], rows: list[Row]) -> None:
    for scalar, (oid, value) in zip(pending, rows, strict=False):
        if value is not None and oid[:len(scalar)] == scalar and len(oid) > len(scalar):
            tables[scalar][oid[len(scalar):]] = value


def _take_rows(tables: WalkTables, cursor: dict[Oid, Oid], cols: list[Oid], rows: list[Row],
               empty: bool) -> None:
    """File repeated rows under their columns; move or end each column's cursor."""
    ended = set(cols) if empty else set()
    for k, (oid, value) in enumerate(rows):
        col = cols[k % len(cols)]
        if col in ended:
            continue
        if value is None or oid[:len(col)] != col or oid <= cursor[col]:
            ended.add(col)
            continue
        tables[col][oid[len(col):]] = value
        cursor[col] = oid
    for col in ended:
        del cursor[col]


__all__ = ["Request", "WalkLimits", "WalkStats", "walk"]
