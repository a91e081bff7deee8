"""Schema versions: Alembic run in code, with no alembic.ini.

The migrations live next to this module (``migrations/``). ``prepare`` is what
``Store.start`` runs: it refuses a database whose revision this code does not
know (written by a newer fabricops), and either upgrades to head or checks
that the database is already there. Stores that start together migrate once:
on PostgreSQL the check and the upgrade run in one transaction under an
advisory lock; on SQLite under an exclusive lock of a file beside the
database (processes started together, e.g. two pipeline workers and the
RCA on a fresh file); in one process under a thread lock as well.

Alembic is imported only when it has work: a database already at head is
recognised by reading its ``alembic_version`` table and comparing it with the
revisions the migration files declare (``declared_heads``), so that a
command that only reads the store starts without loading Alembic.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from sqlalchemy import Connection, Engine, text

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR: Final = Path(__file__).parent / "migrations"
MIGRATION_LOCK_ID: Final = 0x66616272  # pg_advisory_xact_lock key, "fabr"
VERSION_TABLE: Final = "alembic_version"
_PREPARING: Final = threading.Lock()
_DECLARED = re.compile(r"^(down_revision|revision)\b[^=\n]*=\s*(.+)$", re.MULTILINE)
_QUOTED = re.compile(r"[\"']([^\"']+)[\"']")


class SchemaVersionError(RuntimeError):
    """The database is at a revision this code cannot use; the message says which."""


def schema_errors() -> tuple[type[Exception], ...]:
    """What ``prepare`` raises about the schema: SchemaVersionError, and Alembic's
    CommandError once Alembic is loaded (a module not loaded cannot have raised)."""
    alembic_util = sys.modules.get("alembic.util")
    if alembic_util is None:
        return (SchemaVersionError,)
    return (SchemaVersionError, alembic_util.CommandError)


@functools.cache
def declared_heads() -> frozenset[str]:
    """The newest revision(s) as the migration files declare them (``revision`` and
    ``down_revision`` lines), read without Alembic; ``head_revisions`` is Alembic's view."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in sorted((MIGRATIONS_DIR / "versions").glob("*.py")):
        for name, value in _DECLARED.findall(path.read_text(encoding="utf-8")):
            found = _QUOTED.findall(value)
            (revisions if name == "revision" else parents).update(found)
    return frozenset(revisions - parents)


def stored_revisions(connection: Connection) -> frozenset[str]:
    """The revision(s) recorded in the database's version table; empty when there is none."""
    if not connection.dialect.has_table(connection, VERSION_TABLE):
        return frozenset()
    rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))
    return frozenset(str(row[0]) for row in rows)


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for the store's migrations, bound to ``connection`` if given."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revisions() -> tuple[str, ...]:
    """The newest revision(s) this code knows."""
    from alembic.script import ScriptDirectory

    return tuple(ScriptDirectory.from_config(alembic_config()).get_heads())


def current_revisions(connection: Connection) -> tuple[str, ...]:
    """The revision(s) the database is at; empty for a database never migrated."""
    from alembic.runtime.migration import MigrationContext

    return tuple(MigrationContext.configure(connection).get_current_heads())


def check_known(connection: Connection) -> tuple[str, ...]:
    """The database's revisions; SchemaVersionError if this code does not know one."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    known = {rev.revision for rev in script.walk_revisions()}
    current = current_revisions(connection)
    unknown = sorted(set(current) - known)
    if unknown:
        raise SchemaVersionError(
            f"schema revision {', '.join(unknown)} is unknown to this fabricops (it knows up "
            f"to {', '.join(script.get_heads())}); the database was migrated by a newer version")
    return current


@contextlib.contextmanager
def _file_lock(engine: Engine) -> Iterator[None]:
    """Hold an exclusive lock of ``<database>.migrate-lock`` for a SQLite file."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    try:
        handle = open(f"{database}.migrate-lock", "a+b")  # noqa: SIM115 (held below)
    except OSError:  # no folder for it: opening the database says so, clearly
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare(engine: Engine, *, migrate: bool) -> None:
    """Bring the schema to head (``migrate``) or check that it is at head; Alembic is
    loaded only when the database is not at the declared head."""
    with _PREPARING, _file_lock(engine), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_ID})
        if stored_revisions(conn) == declared_heads():
            return
        current = check_known(conn)
        heads = head_revisions()
        if set(current) == set(heads):
            return
        if not migrate:
            raise SchemaVersionError(
                f"schema is at revision {', '.join(current) or '(none)'}, this fabricops needs "
                f"{', '.join(heads)}; start with migrate_on_start or run the migrations")
        from alembic import command

        command.upgrade(alembic_config(conn), "heads")


def upgrade(engine: Engine, revision: str = "heads") -> None:
    """Migrate the database up to ``revision``, in one transaction where the dialect allows."""
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Migrate the database down to ``revision`` (``"base"``: no store table left)."""
    from alembic import command

    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), revision)
