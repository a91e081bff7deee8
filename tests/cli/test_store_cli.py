"""``fabricops store merge``: old segments merged, the same series read back, and one-line
errors for bad options."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner

from fabricops.cli.main import app
from fabricops.store.records import SegmentRecord
from fabricops.store.store import Store, StoreConfig
from tests.pipeline.conftest import Feed, hours_of_frames, small_sim

ENV = {"COLUMNS": "80", "FORCE_COLOR": ""}
T = TypeVar("T")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=ENV)
    return result.exit_code, result.stdout, result.stderr


def _with_store(url: str, work: Callable[[Store], T]) -> T:
    """``work`` on the store at ``url``, started for it and stopped after."""
    store = Store(StoreConfig(url=url))
    store.start()
    try:
        return work(store)
    finally:
        store.stop()


def _fed(store: Store) -> None:
    """200 s of the small simulated fabric, written by a worker."""
    feed = Feed(small_sim(), store)
    feed.run(200)
    feed.worker.flush()


def test_merge_then_read_the_same_series(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fabricops.db'}"
    _with_store(url, _fed)
    query = ("query", "series", "leaf-0-0:eth1", "out_octets", "--db", url, "--json")
    code, before, _ = run(*query)
    assert code == 0
    code, out, _ = run("store", "merge", "--older-than", "30s", "--span", "2m", "--db", url)
    assert code == 0, out
    assert out.startswith("merged ")
    assert "samples, unchanged" in out
    assert "smaller" in out
    assert max(map(len, out.splitlines())) <= 80
    assert run(*query)[1] == before
    code, out, _ = run("store", "merge", "--older-than", "30s", "--span", "2m", "--db", url,
                       "--json")
    assert (code, json.loads(out)["spans"]) == (0, 0), "nothing left to merge"


def test_bad_options_are_one_line_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    for args, wording in ((("--span", "10x"), "--span '10x': expected a duration"),
                          (("--span", "5s"), "--span '5s': expected 1m to 1h"),
                          (("--span", "45m"), "--span '45m': expected 1m to 1h, dividing"),
                          (("--older-than", "soon"), "--older-than 'soon'")):
        code, _, err = run("store", "merge", *args, "--db", url)
        assert code == 2
        assert wording in err
        assert len(err.strip().splitlines()) == 1


def test_prune_deletes_what_is_older_than_the_retention_before_the_newest_data(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fabricops.db'}"

    def fed_then_old(store: Store) -> list[SegmentRecord]:
        _fed(store)
        newest = store.newest_ns()
        return [s for s in store.segments(t0_ns=0, t1_ns=2**62) if s.t_end_ns < newest - 3600e9]

    old = _with_store(url, fed_then_old)
    assert old == [], "the simulated run is shorter than the retention"
    code, out, _ = run("store", "prune", "--retention", "1h", "--db", url)
    assert (code, out.strip()) == (0, "nothing older than 1h"), \
        "the newest data, not the wall clock, bounds what is old"
    code, out, err = run("store", "prune", "--retention", "30m", "--db", url)
    assert code == 2
    assert "--retention '30m': at least 1h" in err
    assert len(err.strip().splitlines()) == 1
    code, out, _ = run("store", "prune", "--db", url, "--json")
    assert (code, json.loads(out)) == (0, {"deleted_rows": 0, "retention_s": 604800.0})


def test_prune_deletes_what_is_past_the_retention(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fabricops.db'}"
    t0 = 472_222 * 3600 * 10**9  # 2023-11-14 22:00 UTC
    _with_store(url, lambda store: hours_of_frames(store, 3, t0))
    code, out, _ = run("store", "prune", "--retention", "2h", "--db", url)
    assert (code, out.strip()) == (0, "deleted 60 rows older than 2h")
    starts = _with_store(url, lambda store: [s.t_start_ns
                                             for s in store.segments(t0_ns=0, t1_ns=2**62)])
    assert min(starts) == t0 + 3600 * 10**9
    assert len(starts) == 121


@pytest.mark.parametrize(("flags", "kept"), [
    ((), (7 * 86400.0, True, 600.0, 3600.0)),
    (("--retention", "30d", "--no-upkeep"), (30 * 86400.0, False, 600.0, 3600.0)),
    (("--upkeep-every", "15s", "--merge-after", "0s"), (7 * 86400.0, True, 15.0, 0.0))])
def test_serve_pipeline_keeps_the_store_as_its_flags_say(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...],
        kept: tuple[float, bool, float, float]) -> None:
    from fabricops.cli import serve
    from fabricops.core.topology import save_topology
    from fabricops.pipeline.service import PipelineService, PipelineServiceConfig
    from fabricops.simulator.builders import leaf_spine

    configs: list[PipelineServiceConfig] = []

    class Recorded(PipelineService):
        def __init__(self, config: PipelineServiceConfig, *args: Any, **kwargs: Any) -> None:
            configs.append(config)
            super().__init__(config, *args, **kwargs)

    monkeypatch.setattr(serve, "PipelineService", Recorded)
    save_topology(leaf_spine(gpus=16), tmp_path / "topology.json")
    code, _, err = run("serve", "pipeline", "--topology", str(tmp_path / "topology.json"),
                         "--bus", "memory", "--db", f"sqlite:///{tmp_path / 'f.db'}",
                         "--duration", "0.2", *flags)
    assert code == 0, err
    assert [(c.store.retention_s, c.upkeep.enabled, c.upkeep.interval_s,
             c.upkeep.merge_after_s) for c in configs] == [kept]


def test_prune_errors_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "fabricops.db"
    url = f"sqlite:///{path}"
    _with_store(url, lambda store: hours_of_frames(store, 3, 472_222 * 3600 * 10**9))
    code, _, err = run("store", "prune", "--retention", "300000d", "--db", url)
    assert code == 2
    assert err.strip() == "error: --retention '300000d': at most 36500d"
    writer = sqlite3.connect(path)
    try:
        writer.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        code, _, err = run("store", "prune", "--retention", "2h", "--db", url)
    finally:
        writer.rollback()
        writer.close()
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "database is locked; try again" in err
