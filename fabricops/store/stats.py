"""What the store holds, in figures: size, rows, compression, open incidents, actions.

Read-only SQL on the store's engine, for SQLite and PostgreSQL; ``read_stats``
reads everything on one connection. Each figure's meaning:

- size: bytes on disk. SQLite: the database file with its ``-wal`` and ``-shm``
  files (page count x page size for an in-memory database); PostgreSQL:
  ``pg_database_size`` of the current database.
- rows per table: every table of the schema but Alembic's version table.
  Exact counts, except on PostgreSQL for a table whose planner estimate
  (``pg_class.reltuples``) is at least ``exact_max_rows``: there the
  estimate, so a scrape never scans a huge table.
- compression: raw bytes (16 B per point: an int64 time and a float64 value,
  for every series at every time of each segment) and stored payload bytes.
- active diagnoses: incidents whose newest revision is at most ``window_s`` old,
  by fault type. "Now" is the later of the wall clock given and the newest
  revision (a simulated fabric's clock may run ahead of the wall).
- actions: how many are in each of the seven states (zero included).

Failures raise StatsError naming the database (without password) and the cause.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from sqlalchemy import Connection, Engine, func, inspect, select, table, text
from sqlalchemy.exc import SQLAlchemyError

from fabricops.core.actions import ActionState
from fabricops.store.database import describe_error
from fabricops.store.models import ACTIONS, DIAGNOSES, SEGMENTS

RAW_POINT_BYTES: Final = 16
EXCLUDED_TABLES: Final = frozenset({"alembic_version"})
_SQLITE_SIDE_FILES: Final = ("", "-wal", "-shm")


class StatsError(RuntimeError):
    """Store figures could not be read; the message names the database and the cause."""


@dataclass(frozen=True)
class StoreStats:
    """One reading of the store's figures (see the module docstring)."""

    size_bytes: int
    rows: dict[str, int]
    raw_bytes: int
    stored_bytes: int
    diagnoses_active: dict[str, int]
    actions: dict[str, int]

    @property
    def compression_ratio(self) -> float | None:
        """Raw over stored bytes; None before the first segment."""
        return self.raw_bytes / self.stored_bytes if self.stored_bytes > 0 else None


def read_stats(engine: Engine, *, now_ns: int, window_s: float,
               exact_max_rows: int = 1_000_000) -> StoreStats:
    """Every figure, read on one connection of ``engine``."""
    try:
        with engine.connect() as conn:
            raw, stored = compression_bytes(conn)
            return StoreStats(
                size_bytes=size_bytes(conn), rows=table_rows(conn, exact_max_rows=exact_max_rows),
                raw_bytes=raw, stored_bytes=stored,
                diagnoses_active=diagnoses_active(conn, now_ns=now_ns, window_s=window_s),
                actions=actions_by_state(conn))
    except (SQLAlchemyError, OSError) as exc:
        shown = engine.url.render_as_string(hide_password=True)
        raise StatsError(f"store figures of database {shown}: {describe_error(exc)}") from exc


def size_bytes(conn: Connection) -> int:
    """Bytes the database takes on disk (see the module docstring)."""
    if conn.dialect.name == "postgresql":
        return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())
    path = conn.engine.url.database
    if path and path != ":memory:" and not path.startswith("file:") and os.path.exists(path):
        return sum(os.path.getsize(path + end) for end in _SQLITE_SIDE_FILES
                   if os.path.exists(path + end))
    pages = conn.execute(text("PRAGMA page_count")).scalar_one()
    page_size = conn.execute(text("PRAGMA page_size")).scalar_one()
    return int(pages) * int(page_size)


def table_rows(conn: Connection, *, exact_max_rows: int = 1_000_000) -> dict[str, int]:
    """Rows per table of the schema (see the module docstring), by table name."""
    names = sorted(set(inspect(conn).get_table_names()) - EXCLUDED_TABLES)
    estimates = _pg_estimates(conn) if conn.dialect.name == "postgresql" else {}
    rows: dict[str, int] = {}
    for name in names:
        estimate = estimates.get(name, -1)
        if estimate >= exact_max_rows:
            rows[name] = estimate
        else:
            rows[name] = int(conn.execute(select(func.count()).select_from(table(name)))
                             .scalar_one())
    return rows


def _pg_estimates(conn: Connection) -> dict[str, int]:
    """The planner's row estimate of each table of the current schema (-1: never analysed)."""
    found = conn.execute(text(
        "SELECT c.relname, c.reltuples FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')")).all()
    return {str(name): int(estimate) for name, estimate in found}


def compression_bytes(conn: Connection) -> tuple[int, int]:
    """(raw bytes, stored payload bytes) over every segment."""
    seg = SEGMENTS.c
    raw, stored = conn.execute(select(
        func.coalesce(func.sum(seg.n_points * seg.n_series), 0),
        func.coalesce(func.sum(func.length(seg.payload)), 0))).one()
    return int(raw) * RAW_POINT_BYTES, int(stored)


def diagnoses_active(conn: Connection, *, now_ns: int, window_s: float) -> dict[str, int]:
    """Incidents whose newest revision is at most ``window_s`` old, by the fault type of
    that revision (see the module docstring for "now")."""
    d = DIAGNOSES.c
    newest_any = conn.execute(select(func.max(d.ts_ns))).scalar_one()
    now = max(now_ns, int(newest_any)) if newest_any is not None else now_ns
    horizon = now - round(window_s * 1e9)
    newest = select(d.diagnosis_id, func.max(d.ts_ns).label("ts_ns")) \
        .where(d.ts_ns >= horizon).group_by(d.diagnosis_id).subquery()
    stmt = select(d.fault_type, func.count()).select_from(DIAGNOSES.join(
        newest, (d.diagnosis_id == newest.c.diagnosis_id) & (d.ts_ns == newest.c.ts_ns))) \
        .group_by(d.fault_type)
    return {str(fault): int(n) for fault, n in conn.execute(stmt).all()}


def actions_by_state(conn: Connection) -> dict[str, int]:
    """Actions per state, every state of ActionState present (zero when none)."""
    counts = dict.fromkeys((s.value for s in ActionState), 0)
    stmt = select(ACTIONS.c.state, func.count()).group_by(ACTIONS.c.state)
    for state, n in conn.execute(stmt).all():
        if state in counts:
            counts[state] = int(n)
    return counts
