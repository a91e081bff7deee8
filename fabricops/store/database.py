"""Database URLs and engines: SQLite (the embedded default) and PostgreSQL.

A ``postgresql://`` (or ``postgres://``) URL is given the psycopg 3 driver. A
SQLite database runs in WAL mode (readers do not block the writer) with
foreign keys enforced; ``timeout_s`` is how long a writer waits for the lock.
On PostgreSQL ``timeout_s`` bounds the connect (libpq counts whole seconds,
at least 2), and pooled connections are checked before use, so a restarted
server costs one failed ping, not a failed write.
"""

from __future__ import annotations

import math
import re
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    OperationalError,
)
from sqlalchemy.exc import TimeoutError as SqlTimeoutError

PSYCOPG_DRIVER = "postgresql+psycopg"
_PG_ALIASES = frozenset({"postgresql", "postgres", "postgresql+psycopg"})
_CAUSE_CHARS = 400
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


class DatabaseUrlError(ValueError):
    """A URL that is not a SQLite or PostgreSQL SQLAlchemy URL."""


def parse_url(url: str) -> URL:
    """The SQLAlchemy URL of ``url``, PostgreSQL mapped to psycopg 3."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseUrlError(f"{url!r} is not a database URL: {exc}") from None
    if parsed.drivername in _PG_ALIASES:
        return parsed.set(drivername=PSYCOPG_DRIVER)
    if parsed.get_backend_name() == "sqlite":
        return parsed
    raise DatabaseUrlError(f"database {parsed.render_as_string(hide_password=True)}: only "
                           f"sqlite and postgresql URLs are supported")


def display_url(url: str) -> str:
    """``url`` as written, without its password (for messages and logs)."""
    scheme, sep, rest = url.partition("://")
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    userinfo, at, host = rest[:end].rpartition("@")
    shown = f"{scheme}{sep}{userinfo.split(':', 1)[0]}{at}{host}{rest[end:]}" if sep and at else url
    shown = _QUERY_PASSWORD.sub(r"\1***", shown)
    try:
        if make_url(shown).password is not None:
            return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        pass
    return shown


def build_engine(url: URL, *, timeout_s: float) -> Engine:
    """An engine for ``url``; it has not connected yet."""
    if url.get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": timeout_s})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(
        url, pool_pre_ping=True,
        connect_args={"connect_timeout": max(2, math.ceil(timeout_s)),
                      "application_name": "fabricops"})


def describe_error(exc: BaseException) -> str:
    """One line naming the cause of ``exc`` (the driver's message, not the SQL)."""
    cause: BaseException = exc.orig if isinstance(exc, DBAPIError) and exc.orig else exc
    text = " ".join(str(cause).split())
    if len(text) > _CAUSE_CHARS:
        text = text[:_CAUSE_CHARS] + "..."
    return f"{type(cause).__name__}: {text}"


def is_unavailable(exc: BaseException) -> bool:
    """True if ``exc`` says the database is away or busy, not that the statement is wrong.

    Connection refused or lost, a server shutting down, a pool or lock timeout:
    the same statement may succeed later. A value out of range, a constraint
    or a syntax error will fail again."""
    if isinstance(exc, DisconnectionError | SqlTimeoutError | InterfaceError):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, OperationalError)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()
