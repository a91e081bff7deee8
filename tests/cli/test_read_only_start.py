"""Read-only commands load only what they use: no Alembic for a store already at head, no
store at all for a command that asks the API, no series decoder for a listing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from fabricops.store import Store, StoreConfig
from fabricops.store.database import build_engine, parse_url
from fabricops.store.schema import declared_heads, head_revisions, prepare, upgrade

NO_API = "http://127.0.0.1:9"
NEVER = ("alembic", "pandas", "scipy", "sklearn", "fabricops.pipeline", "fabricops.simulator",
         "fabricops.rca")
STORE = ("sqlalchemy", "fabricops.store", "fabricops.remediation")

PROBE = """
import contextlib, io, json, sys
from fabricops.cli.main import app
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        app(sys.argv[1:], standalone_mode=False)
    except SystemExit:
        pass
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.__stderr__)
print(json.dumps(sorted(m for m in sys.modules)))
"""


def loaded_by(*args: str) -> set[str]:
    """The modules a ``fabricops ARGS`` process has imported once it is done."""
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                          text=True, timeout=120, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def among(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The modules that are one of ``packages`` or inside one."""
    return sorted(m for m in modules if any(m == p or m.startswith(f"{p}.") for p in packages))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store migrated to head, as the pipeline leaves it."""
    url = f"sqlite:///{tmp_path_factory.mktemp('ro') / 'fabricops.db'}"
    store = Store(StoreConfig(url=url))
    store.start()
    store.stop()
    return url


@pytest.mark.parametrize("args", [
    ("actions", "list"), ("actions", "show", "act-a"), ("query", "events")])
def test_a_listing_from_a_store_at_head_loads_no_alembic_nor_series_decoder(
        db: str, args: tuple[str, ...]) -> None:
    modules = loaded_by(*args, "--db", db)
    assert "fabricops.store.store" in modules
    assert among(modules, NEVER) == []


@pytest.mark.parametrize("args", [
    ("diagnose",), ("actions", "list"), ("actions", "show", "act-a"), ("query", "--help"),
    ("actions", "--help")])
def test_commands_that_ask_the_api_load_no_store(args: tuple[str, ...]) -> None:
    extra = ("--api", NO_API) if "--help" not in args else ()
    modules = loaded_by(*args, *extra)
    assert among(modules, STORE + NEVER) == []


def test_the_declared_head_is_alembics_head() -> None:
    assert declared_heads() == frozenset(head_revisions())


def test_a_store_behind_head_is_still_migrated_or_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = build_engine(parse_url(url), timeout_s=5)
    try:
        upgrade(engine, "0001")
        with pytest.raises(RuntimeError, match="schema is at revision 0001"):
            prepare(engine, migrate=False)
        prepare(engine, migrate=True)
        with engine.connect() as conn:
            stored = {row[0] for row in conn.execute(text("SELECT version_num "
                                                          "FROM alembic_version"))}
        assert stored == declared_heads()
    finally:
        engine.dispose()
