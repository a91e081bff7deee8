"""Store start/stop, configuration, and how failures to reach a database read."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from fabricops.store import Store, StoreConfig, StoreError
from fabricops.store.database import PSYCOPG_DRIVER, display_url, parse_url
from tests.store import samples

NO_SOCKET_DIR = "/nonexistent/fabricops-test-socket-dir"


def test_start_on_an_unreachable_postgresql_names_the_database_and_the_cause() -> None:
    url = f"postgresql://fabricops:s3cret@/telemetry?host={NO_SOCKET_DIR}"
    store = Store(StoreConfig(url=url, timeout_s=2))
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        store.start()
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert f"postgresql://fabricops@/telemetry?host={NO_SOCKET_DIR}" in message
    assert "No such file or directory" in message
    assert "s3cret" not in message
    assert store.registry.get_sample_value("fabricops_store_errors_total",
                                           {"op": "start"}) == 1


def test_start_on_a_sqlite_file_that_cannot_be_created_names_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing-dir' / 'store.db'}"
    with pytest.raises(StoreError, match=r"database sqlite:///.*missing-dir/store.db: .*unable "
                                         r"to open database file"):
        Store(StoreConfig(url=url)).start()


@pytest.mark.parametrize(("url", "cause"), [
    ("mysql://db/telemetry", "only sqlite and postgresql"),
    ("not a url", "is not a database URL"),
])
def test_start_with_an_unusable_url_is_a_store_error(url: str, cause: str) -> None:
    with pytest.raises(StoreError, match=cause):
        Store(StoreConfig(url=url)).start()


def test_postgresql_urls_get_the_psycopg_driver() -> None:
    for url in ("postgresql://u:p@db:5432/x", "postgres://u:p@db/x",
                "postgresql+psycopg://u:p@db/x"):
        assert parse_url(url).drivername == PSYCOPG_DRIVER
    assert parse_url("sqlite:///x.db").drivername == "sqlite"
    assert display_url("postgresql://u:p@db:5432/x") == "postgresql://u@db:5432/x"


def test_the_constructor_is_inert_and_calls_before_start_fail(tmp_path: Path) -> None:
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path / 'store.db'}"))
    assert not (tmp_path / "store.db").exists()
    with pytest.raises(StoreError, match=r"put_events on database .*not started"):
        store.put_events(samples.events())
    with pytest.raises(StoreError, match=r"segments on database .*not started"):
        store.segments(t0_ns=0, t1_ns=1)


def test_a_store_can_stop_and_start_again_and_keeps_its_rows(db_url: str) -> None:
    store = Store(StoreConfig(url=db_url))
    store.start()
    store.start()
    store.put_events(samples.events())
    store.stop()
    store.stop()
    store.start()
    try:
        assert len(store.events(t0_ns=0, t1_ns=2**62)) == len(samples.events())
    finally:
        store.stop()


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = Store(StoreConfig(url=f"sqlite:///{path}"))
    store.start()
    store.stop()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_config_is_strict_and_frozen() -> None:
    with pytest.raises(ValidationError):
        StoreConfig.model_validate({"url": "sqlite://", "retention_days": 3})
    with pytest.raises(ValidationError):
        StoreConfig(retention_s=0)
    config = StoreConfig()
    assert (config.url, config.migrate_on_start, config.retention_s) == \
        ("sqlite:///fabricops.db", True, 7 * 86400)
    with pytest.raises(ValidationError):
        config.url = "sqlite://"  # type: ignore[misc]
