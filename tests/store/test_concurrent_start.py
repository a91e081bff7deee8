"""Processes that start together on a fresh SQLite file migrate it once, and all start."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from fabricops.store.store import Store, StoreConfig


def _start(url: str, ready: Any) -> None:
    store = Store(StoreConfig(url=url))
    ready.wait()  # every process begins its migration at the same moment
    store.start()
    store.stop()


def test_four_processes_starting_on_one_new_database_all_start(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(4)
    procs = [ctx.Process(target=_start, args=(url, ready)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
