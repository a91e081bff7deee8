"""Batched, idempotent inserts for SQLite and PostgreSQL (SQLAlchemy Core).

``insert_rows`` writes a batch in chunks inside the caller's transaction, one
``executemany`` per chunk (pipelined by psycopg on PostgreSQL: no round trip
per row). A row whose unique key is already stored is skipped (``ON CONFLICT
DO NOTHING``) or merged (``ON CONFLICT DO UPDATE ... WHERE``, see ``Upsert``);
the result is the number of rows inserted or actually changed, so writing a
batch again returns 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Union

from sqlalchemy import ColumnElement, Connection, Table, case

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

CHUNK_ROWS: Final = 5000
DIALECTS: Final = ("sqlite", "postgresql")

Row = Mapping[str, Any]
DialectInsert = Union["postgresql.Insert", "sqlite.Insert"]


def _insert(dialect: str) -> Callable[[Table], DialectInsert]:
    """The dialect's INSERT construct, imported when a write first needs it (a store that
    only reads never loads the PostgreSQL dialect)."""
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert
    from sqlalchemy.dialects import postgresql

    return postgresql.insert


@dataclass(frozen=True)
class Upsert:
    """How a conflicting row is merged: ``set_`` and ``where`` built from the
    statement's ``excluded`` columns and the table (a row is updated only where
    ``where`` holds, so an unchanged row counts as a duplicate)."""

    build: Callable[[Any, Table], tuple[dict[str, ColumnElement[Any]], ColumnElement[bool]]]


class UnsupportedDialectError(RuntimeError):
    """The database is neither SQLite nor PostgreSQL."""


def insert_rows(conn: Connection, table: Table, rows: Sequence[Row], *,
                key: Sequence[str], upsert: Upsert | None = None) -> int:
    """Insert ``rows`` (dicts of every non-id column) into ``table``; duplicates by
    unique ``key`` are skipped or merged. Returns rows inserted or changed."""
    if not rows:
        return 0
    name = conn.dialect.name
    if name not in DIALECTS:
        raise UnsupportedDialectError(f"dialect {name!r} is not supported (sqlite, postgresql)")
    stmt = _on_conflict(_insert(name)(table), key, upsert, table) \
        .execution_options(preserve_rowcount=True)
    return sum(conn.execute(stmt, list(chunk)).rowcount for chunk in _chunks(rows))


def insert_new(conn: Connection, table: Table, rows: Sequence[Row], *,
               key: Sequence[str]) -> set[tuple[Any, ...]]:
    """Insert ``rows`` as ``insert_rows`` does (duplicates skipped); returns the ``key``
    of each row actually inserted (``RETURNING``: SQLite 3.35+, PostgreSQL)."""
    if not rows:
        return set()
    name = conn.dialect.name
    if name not in DIALECTS:
        raise UnsupportedDialectError(f"dialect {name!r} is not supported (sqlite, postgresql)")
    stmt = _on_conflict(_insert(name)(table), key, None, table) \
        .returning(*(table.c[k] for k in key))
    return {tuple(r) for chunk in _chunks(rows) for r in conn.execute(stmt, list(chunk))}


def greater(a: ColumnElement[Any], b: ColumnElement[Any]) -> ColumnElement[Any]:
    """The larger of two non-null values, in SQL both SQLite and PostgreSQL accept."""
    return case((a >= b, a), else_=b)


def lesser(a: ColumnElement[Any], b: ColumnElement[Any]) -> ColumnElement[Any]:
    """The smaller of two non-null values, in SQL both SQLite and PostgreSQL accept."""
    return case((a <= b, a), else_=b)


def _on_conflict(stmt: DialectInsert, key: Sequence[str], upsert: Upsert | None,
                 table: Table) -> DialectInsert:
    if upsert is None:
        return stmt.on_conflict_do_nothing(index_elements=list(key))
    set_, where = upsert.build(stmt.excluded, table)
    return stmt.on_conflict_do_update(index_elements=list(key), set_=set_, where=where)


def _chunks(rows: Sequence[Row]) -> Iterator[Sequence[Row]]:
    for start in range(0, len(rows), CHUNK_ROWS):
        yield rows[start:start + CHUNK_ROWS]
