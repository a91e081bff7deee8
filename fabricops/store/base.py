"""The store's connection and transactions (``StoreBase``), its config and errors.

``StoreBase`` owns the engine: ``start`` connects and migrates, ``stop`` closes;
``_transaction`` runs one write, ``_read``/``_query`` one read, each failure as
a StoreError naming the database and the cause (``transient`` when waiting may
cure it) and counted. The tables' methods live in :class:`~fabricops.store.store.Store`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection, Engine, Row, Select
from sqlalchemy.exc import SQLAlchemyError

from fabricops.store import bulk
from fabricops.store.bulk import UnsupportedDialectError, insert_rows
from fabricops.store.database import (
    DatabaseUrlError,
    build_engine,
    describe_error,
    display_url,
    is_unavailable,
    parse_url,
)
from fabricops.store.metrics import StoreMetrics
from fabricops.store.models import Base
from fabricops.store.schema import SchemaVersionError, prepare, schema_errors

T = TypeVar("T")
_FAILURES = (SQLAlchemyError, UnsupportedDialectError, OverflowError)


def _start_failures() -> tuple[type[Exception], ...]:
    """What ``start`` turns into StoreError, looked up when a start fails."""
    return (*_FAILURES, *schema_errors())


class StoreConfig(BaseModel):
    """Where the store is and how long it keeps telemetry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(default="sqlite:///fabricops.db", min_length=1,
                     description="SQLAlchemy URL; postgresql:// uses psycopg 3")
    migrate_on_start: bool = Field(
        default=True, description="Upgrade the schema on start; else require it at head")
    retention_s: float = Field(default=7 * 86400, gt=0,
                               description="prune() deletes telemetry older than this")
    timeout_s: float = Field(default=5.0, gt=0, le=300,
                             description="PostgreSQL connect timeout; SQLite lock wait")


class StoreError(RuntimeError):
    """A store operation failed; the message names the database and the cause.

    ``transient`` is True when the database could not be reached or was busy
    (waiting and retrying the same write may succeed), False when the data or
    the request is at fault (retrying cannot help)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class ActionConflict(StoreError):  # noqa: N818  (the name other modules use)
    """An action write lost a race or asked for a move its state does not allow; the
    message names the action, its current state and what was asked."""


class ActionNotFound(StoreError, LookupError):  # noqa: N818  (the name other modules use)
    """No action has the id asked for; the message names it."""

class StoreBase:
    """One engine and the transactions of every store method; see the module docstring."""

    def __init__(self, config: StoreConfig, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = StoreMetrics(self.registry)
        self.url = display_url(config.url)
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine | None:
        """The SQLAlchemy engine while started (for read-only statistics), else None."""
        return self._engine

    def start(self) -> None:
        """Connect, then migrate to head (or check the schema is at head)."""
        if self._engine is not None:
            return
        try:
            engine = build_engine(parse_url(self.config.url), timeout_s=self.config.timeout_s)
        except DatabaseUrlError as exc:
            self.metrics.errors.labels("start").inc()
            raise StoreError(f"database {self.url}: {exc}") from exc
        try:
            prepare(engine, migrate=self.config.migrate_on_start)
        except _start_failures() as exc:
            engine.dispose()
            self.metrics.errors.labels("start").inc()
            cause = str(exc) if isinstance(exc, SchemaVersionError) else describe_error(exc)
            raise StoreError(f"database {self.url}: {cause}") from exc
        self._engine = engine

    def stop(self) -> None:
        """Close every pooled connection; the store may be started again."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
    def _put(self, op: str, table: str, rows: Sequence[Mapping[str, object]],
             key: Sequence[str], *,
             offered: int | None = None, upsert: bulk.Upsert | None = None) -> int:
        target = Base.metadata.tables[table]
        changed = self._transaction(
            op, lambda conn: insert_rows(conn, target, rows, key=key, upsert=upsert))
        self.metrics.written(table, len(rows) if offered is None else offered, changed)
        return changed

    def _transaction(self, op: str, work: Callable[[Connection], T]) -> T:
        engine = self._running(op)
        started = time.perf_counter()
        try:
            with engine.begin() as conn:
                result = work(conn)
        except _FAILURES as exc:
            self.metrics.errors.labels(op).inc()
            raise StoreError(f"{op} on database {self.url}: {describe_error(exc)}",
                             transient=is_unavailable(exc)) from exc
        self.metrics.write_seconds.labels(op).observe(time.perf_counter() - started)
        return result

    def _query(self, op: str, build: Callable[[str], Select[Any]]) -> Sequence[Row[Any]]:
        """Rows of the statement ``build`` makes for the database's dialect name."""
        return self._read(op, lambda conn: conn.execute(build(conn.dialect.name)).all())

    def _read(self, op: str, work: Callable[[Connection], T]) -> T:
        engine = self._running(op)
        try:
            with engine.connect() as conn:
                return work(conn)
        except _FAILURES as exc:
            self.metrics.errors.labels(op).inc()
            raise StoreError(f"{op} on database {self.url}: {describe_error(exc)}",
                             transient=is_unavailable(exc)) from exc

    def _running(self, op: str) -> Engine:
        if self._engine is None:
            raise StoreError(f"{op} on database {self.url}: the store is not started",
                             transient=True)
        return self._engine
