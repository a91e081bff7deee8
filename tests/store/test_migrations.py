"""The Alembic migrations against the models, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

from fabricops.store import Store, StoreConfig, StoreError
from fabricops.store.database import build_engine, parse_url
from fabricops.store.models import Base
from fabricops.store.schema import alembic_config, downgrade, head_revisions, upgrade

STORE_TABLES = {"series", "segments", "events", "int_paths", "staged_frames", "stream_states",
                "diagnoses", "actions", "action_log", "webhook_outbox"}
TABLES_AT_0001 = STORE_TABLES - {"stream_states", "diagnoses", "actions", "action_log",
                                 "webhook_outbox"}


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    built = build_engine(parse_url(db_url), timeout_s=5)
    yield built
    built.dispose()


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def test_the_history_is_one_line_to_one_head() -> None:
    assert len(head_revisions()) == 1


def test_upgrade_creates_exactly_the_models_schema(engine: Engine) -> None:
    upgrade(engine)
    assert _tables(engine) == STORE_TABLES == set(Base.metadata.tables)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True,
                                                         "compare_server_default": True})
        assert compare_metadata(context, Base.metadata) == []


def test_downgrade_to_base_leaves_no_table(engine: Engine) -> None:
    upgrade(engine)
    downgrade(engine)
    assert _tables(engine) == set()
    upgrade(engine)
    assert _tables(engine) == STORE_TABLES


def test_each_step_can_be_undone_and_redone_with_rows_in_place(engine: Engine) -> None:
    upgrade(engine, "0001")
    assert _tables(engine) == TABLES_AT_0001
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO series (device, entity, metric, kind) "
                          "VALUES ('leaf-0', 'leaf-0:eth1', 'in_octets', 'counter')"))
    upgrade(engine)
    assert _tables(engine) == STORE_TABLES
    downgrade(engine, "0001")
    assert _tables(engine) == TABLES_AT_0001
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM series")).scalar_one() == 1


def test_a_database_migrated_by_newer_code_is_refused(db_url: str, engine: Engine) -> None:
    upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    with pytest.raises(StoreError, match=r"database .*: schema revision 9999_future is "
                                         r"unknown to this fabricops"):
        Store(StoreConfig(url=db_url)).start()


def test_without_migrate_on_start_the_schema_must_be_at_head(db_url: str,
                                                             engine: Engine) -> None:
    store = Store(StoreConfig(url=db_url, migrate_on_start=False))
    with pytest.raises(StoreError, match=r"schema is at revision \(none\), this fabricops "
                                         rf"needs {head_revisions()[0]}"):
        store.start()
    assert _tables(engine) == set()
    upgrade(engine)
    store.start()
    store.stop()


def test_stores_starting_together_migrate_once(db_url: str) -> None:
    stores = [Store(StoreConfig(url=db_url)) for _ in range(4)]
    errors: list[BaseException] = []
    gate = threading.Barrier(len(stores))

    def start(store: Store) -> None:
        gate.wait()
        try:
            store.start()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for store in stores:
        store.stop()
    assert errors == []


def test_offline_mode_renders_postgresql_ddl() -> None:
    out = io.StringIO()
    config = alembic_config()
    config.output_buffer = out
    config.set_main_option("sqlalchemy.url", "postgresql+psycopg://db/telemetry")
    command.upgrade(config, "head", sql=True)
    ddl = out.getvalue()
    assert "CREATE TABLE segments" in ddl
    assert "id BIGSERIAL NOT NULL" in ddl
    assert "INSERT INTO alembic_version" in ddl
