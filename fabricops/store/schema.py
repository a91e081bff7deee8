"""Schema versions: Alembic run in code, with no alembic.ini.

The migrations live next to this module (``migrations/``). ``prepare`` is what
``Store.start`` runs: it refuses a database whose revision this code does not
know (written by a newer fabricops), and either upgrades to head or checks
that the database is already there. Stores that start together migrate once:
on PostgreSQL the check and the upgrade run in one transaction under an
advisory lock; on SQLite under an exclusive lock of a file beside the
database (processes started together, e.g. two pipeline workers and the
RCA on a fresh file); in one process under a thread lock as well.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

MIGRATIONS_DIR: Final = Path(__file__).parent / "migrations"
MIGRATION_LOCK_ID: Final = 0x66616272  # pg_advisory_xact_lock key, "fabr"
_PREPARING: Final = threading.Lock()


class SchemaVersionError(RuntimeError):
    """The database is at a revision this code cannot use; the message says which."""


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for the store's migrations, bound to ``connection`` if given."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revisions() -> tuple[str, ...]:
    """The newest revision(s) this code knows."""
    return tuple(ScriptDirectory.from_config(alembic_config()).get_heads())


def current_revisions(connection: Connection) -> tuple[str, ...]:
    """The revision(s) the database is at; empty for a database never migrated."""
    return tuple(MigrationContext.configure(connection).get_current_heads())


def check_known(connection: Connection) -> tuple[str, ...]:
    """The database's revisions; SchemaVersionError if this code does not know one."""
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
    """Bring the schema to head (``migrate``) or check that it is at head."""
    with _PREPARING, _file_lock(engine), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_ID})
        current = check_known(conn)
        heads = head_revisions()
        if set(current) == set(heads):
            return
        if not migrate:
            raise SchemaVersionError(
                f"schema is at revision {', '.join(current) or '(none)'}, this fabricops needs "
                f"{', '.join(heads)}; start with migrate_on_start or run the migrations")
        command.upgrade(alembic_config(conn), "heads")


def upgrade(engine: Engine, revision: str = "heads") -> None:
    """Migrate the database up to ``revision``, in one transaction where the dialect allows."""
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Migrate the database down to ``revision`` (``"base"``: no store table left)."""
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), revision)
