"""``fabricops query``: what the pipeline kept, and clear errors for bad requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricops.cli.main import app
from fabricops.simulator.faults import FaultSpec
from fabricops.store.store import Store, StoreConfig
from tests.pipeline.conftest import Feed, small_sim

ENV = {"COLUMNS": "200", "FORCE_COLOR": ""}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('q') / 'fabricops.db'}"
    store = Store(StoreConfig(url=url))
    store.start()
    sim = small_sim()
    sim.add_fault(FaultSpec(type="link_down", entity="agg-0-0:eth1~leaf-0-0:eth3", start_s=30,
                            duration_s=20))
    Feed(sim, store).run(90)
    store.stop()
    return url


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["query", *args], env=ENV)
    return result.exit_code, result.stdout, result.stderr


def test_series_as_rates_over_the_last_minute(db: str) -> None:
    code, out, _ = run("series", "leaf-0-0:eth1", "out_octets", "--rate", "--last", "60s",
                       "--db", db, "--json")
    assert code == 0
    data = json.loads(out)
    assert 55 <= len(data["ts_ns"]) <= 61
    assert all(v is None or v >= 0 for v in data["values"])
    assert data["source"] == "sim"


def test_events_show_the_link_going_down_and_back(db: str) -> None:
    code, out, _ = run("events", "--kind", "state_change", "--db", db, "--json")
    assert code == 0
    changes = [(e["entity"], e["value"]) for e in json.loads(out)]
    assert ("leaf-0-0:eth3", 2.0) in changes
    assert ("leaf-0-0:eth3", 1.0) in changes
    code, table, _ = run("events", "--db", db)
    assert "leaf-0-0:eth3" in table


def test_latest_values(db: str) -> None:
    code, out, _ = run("latest", "leaf-0-0:eth1", "-m", "temperature_c", "--db", db, "--json")
    assert code == 0
    (row,) = json.loads(out)
    assert row["metric"] == "temperature_c"
    assert 10 < row["value"] < 100


@pytest.mark.parametrize(("args", "message"), [
    (("series", "leaf-0-0:eth1", "out_octet"), "unknown metric 'out_octet'"),
    (("series", "leaf-0-0:eth1", "temperature_c", "--rate"), "only counters have rates"),
    (("series", "leaf-0-0:eth1", "out_octets", "--last", "ten"), "--last 'ten'"),
    (("series", "nowhere:eth1", "out_octets"), "no samples of out_octets on nowhere:eth1"),
])
def test_bad_requests_are_named(db: str, args: tuple[str, ...], message: str) -> None:
    code, _, err = run(*args, "--db", db)
    assert code == 2
    assert message in " ".join(err.split())


def test_a_store_that_was_never_created_is_named(tmp_path: Path) -> None:
    code, _, err = run("events", "--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert code == 2
    assert "none.db" in err
