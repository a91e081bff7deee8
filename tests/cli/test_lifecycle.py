"""A long-running command waits for a signal, its duration or a dead worker; a dead
worker stops everything and exits 3 naming it."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from fabricops.cli import lifecycle
from fabricops.cli.common import EXIT_BAD_INPUT, EXIT_WORKER_DIED
from fabricops.cli.lifecycle import (
    Running,
    running_command,
    serve_until_stopped,
    wait_for_stop,
)
from fabricops.cli.main import app
from fabricops.cli.preflight import StartupError
from fabricops.core.liveness import Liveness

ENV = {"COLUMNS": "200", "FORCE_COLOR": ""}


def test_the_wait_ends_when_a_worker_dies_and_returns_it() -> None:
    liveness = Liveness()
    liveness.alive("pipeline")
    threading.Timer(0.2, liveness.dead, ("rca", "the bus is gone")).start()
    started = time.monotonic()
    dead = wait_for_stop(liveness, threading.Event(), duration_s=60.0)
    assert [(w.name, w.reason) for w in dead] == [("rca", "the bus is gone")]
    assert time.monotonic() - started < 30.0


def test_the_wait_ends_empty_on_a_stop_request_or_the_duration() -> None:
    liveness = Liveness()
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    assert wait_for_stop(liveness, stop, duration_s=0.0, poll_s=0.05) == []
    ticks: list[float] = []
    assert wait_for_stop(liveness, threading.Event(), duration_s=0.2, tick=ticks.append,
                         poll_s=0.05) == []
    assert ticks[-1] >= 0.2


def _run_command(body: Callable[[Running], None]) -> None:
    with running_command() as running:
        body(running)


def test_a_dead_worker_stops_everything_newest_first_and_exits_3(
        capsys: pytest.CaptureFixture[str]) -> None:
    stopped: list[str] = []

    def body(running: Running) -> None:
        running.started(lambda: stopped.append("bus"))
        running.started(lambda: stopped.append("rca"))
        running.liveness.dead("rca", "gave up after 5 failed polls")
        serve_until_stopped(running, duration_s=60.0)

    with pytest.raises(typer.Exit) as exited:
        _run_command(body)
    assert exited.value.exit_code == EXIT_WORKER_DIED
    assert stopped == ["rca", "bus"]
    assert capsys.readouterr().err == (
        "error: worker rca stopped: gave up after 5 failed polls\n")


def _stopping_says(what: str) -> Callable[[], None]:
    return lambda: print(what, file=sys.stderr)


def test_a_startup_error_stops_what_had_started_and_exits_2(
        capsys: pytest.CaptureFixture[str]) -> None:
    stopped: list[str] = []

    def body(running: Running) -> None:
        running.started(lambda: stopped.append("bus"))
        running.started(_stopping_says("collector: target leaf-0 unavailable"))
        raise StartupError("--api-port 8080: TCP 127.0.0.1:8080 already in use")

    with pytest.raises(typer.Exit) as exited:
        _run_command(body)
    assert exited.value.exit_code == EXIT_BAD_INPUT
    assert stopped == ["bus"]
    # what a part says while stopping comes first: the error is the last line
    assert capsys.readouterr().err == (
        "collector: target leaf-0 unavailable\n"
        "error: --api-port 8080: TCP 127.0.0.1:8080 already in use\n")


def test_a_dead_worker_is_named_after_what_stopping_printed(
        capsys: pytest.CaptureFixture[str]) -> None:
    def body(running: Running) -> None:
        running.started(_stopping_says("pipeline: flushed 3 windows"))
        running.liveness.dead("rca", "gave up after 5 failed polls")
        serve_until_stopped(running, duration_s=60.0)

    with pytest.raises(typer.Exit):
        _run_command(body)
    assert capsys.readouterr().err.splitlines() == [
        "pipeline: flushed 3 windows", "error: worker rca stopped: gave up after 5 failed polls"]


class _DiesOnceServing(Liveness):
    """A Liveness whose worker ``rca-consumer`` gives up once the API serves."""

    def alive(self, name: str) -> None:
        super().alive(name)
        if name == "api":
            threading.Timer(0.3, self.dead, ("rca-consumer", "lost the bus")).start()


def test_serve_api_exits_3_naming_the_dead_worker_and_frees_its_port(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "Liveness", _DiesOnceServing)
    result = CliRunner().invoke(app, ["serve", "api", "--port", "0", "--duration", "60",
                                      "--db", f"sqlite:///{tmp_path / 'f.db'}"], env=ENV)
    assert result.exit_code == EXIT_WORKER_DIED, result.output
    assert result.stderr.splitlines()[-1] == "error: worker rca-consumer stopped: lost the bus"
    port = re.search(r"api: http://127\.0\.0\.1:(\d+)", result.stderr)
    assert port is not None, result.stderr
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", int(port.group(1))))


def test_up_exits_3_naming_the_dead_worker(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "Liveness", _DiesOnceServing)
    monkeypatch.chdir(tmp_path)
    scenario = tmp_path / "small.yaml"
    scenario.write_text("name: small\nseed: 1\nduration_s: 10\n"
                        "topology: {builder: leaf_spine, params: {gpus: 16}}\n"
                        "jobs: [{name: job-a, hosts: 2, compute_s: 0.0}]\n")
    result = CliRunner().invoke(app, ["up", str(scenario), "--duration", "60", "--api-port",
                                      "0", "--int-port", "0", "--db",
                                      f"sqlite:///{tmp_path / 'f.db'}"], env=ENV)
    assert result.exit_code == EXIT_WORKER_DIED, result.output
    assert result.stderr.splitlines()[-1] == "error: worker rca-consumer stopped: lost the bus"


_LATE_FAILURE = """
import sys
from fabricops.cli import up
from fabricops.cli.main import app
from fabricops.cli.preflight import StartupError

def refuse(*args, **kwargs):
    raise StartupError("--api-port 8080: TCP 127.0.0.1:8080 already in use")

up.start_fabric_api = refuse
app(sys.argv[1:])
"""


def test_up_stops_every_part_it_started_when_a_late_one_fails(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LATE_FAILURE, "up", "--preset", "demo", "--duration", "60",
         "--api-port", "0", "--int-port", "0", "--db", f"sqlite:///{tmp_path / 'f.db'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    *before, last = done.stderr.splitlines()
    assert last == "error: --api-port 8080: TCP 127.0.0.1:8080 already in use"
    # on a busy machine the twin's agents, in the same process, may not answer the
    # collectors' first polls before the failure: their outage lines, and nothing
    # else, may come before the error
    outage = re.compile(r"\S+ \S+ WARNING fabricops\.collectors\.\w+: "
                        r"(.* (unavailable: |back after )"
                        r"|(SNMP|gNMI) targets: [\d,]+ more (unavailable|back) in the last )")
    assert all(outage.match(line) for line in before), done.stderr
