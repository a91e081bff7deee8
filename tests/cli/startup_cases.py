"""Bad flags and files for the commands that start servers, each with what its one
``error:`` line must name; shared by the tests and ``bench/bench_startup_errors.py``.

Every case runs the real command line in a subprocess in ``folder`` (so nothing
lands in the working tree). Ports taken and brokers away are made real: a
socket bound for the duration of the case.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BAD_ALERTS = "receivers:\n  - {name: noc, url: notaurl}\n"
BROKEN_YAML = "receivers: [\n"


@dataclass(frozen=True)
class Outcome:
    """What a command did: exit code, its output, and the wall seconds it took."""

    code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


@dataclass(frozen=True)
class Case:
    """A command line (``{port}`` and ``{dir}`` filled in) and the words its line names."""

    name: str
    args: tuple[str, ...]
    names: tuple[str, ...]
    taken: str = ""  # "tcp" (listening), "udp", or "closed" (bound, not listening: refused)


def _up(*extra: str) -> tuple[str, ...]:
    return ("up", "--duration", "30", "--db", "sqlite:///{dir}/f.db", "--api-port", "0",
            "--int-port", "0", *extra)


def _serve(component: str, *extra: str) -> tuple[str, ...]:
    return ("serve", component, "--topology", "{dir}/topology.json", "--duration", "30",
            "--db", "sqlite:///{dir}/f.db", *extra)


def _sim(*extra: str) -> tuple[str, ...]:
    return ("serve", "sim", "--duration", "30", "--out", "{dir}/sim", "--snmp-port", "0",
            "--gnmi-port", "0", "--api-port", "0", *extra)


CASES = (
    Case("up: missing alerts file", _up("--alerts", "{dir}/missing.yaml"),
         ("--alerts", "missing.yaml", "No such file")),
    Case("up: alerts file with a bad URL", _up("--alerts", "{dir}/bad-alerts.yaml"),
         ("--alerts", "bad-alerts.yaml", "receivers.0.url", "notaurl")),
    Case("up: alerts file not YAML", _up("--alerts", "{dir}/broken.yaml"),
         ("--alerts", "broken.yaml", "not valid YAML")),
    Case("up: bad webhook URL", _up("--webhook", "notaurl"), ("--webhook", "notaurl")),
    Case("up: API port taken", _up("--api-port", "{port}"), ("--api-port", "{port}", "in use"),
         taken="tcp"),
    Case("up: INT port taken", _up("--int-port", "{port}"), ("--int-port", "{port}", "in use"),
         taken="udp"),
    Case("up: db URL not a URL", _up("--db", "nonsense"), ("--db", "nonsense")),
    Case("up: retention too long", _up("--retention", "40000d"),
         ("--retention", "40000d", "at most 36500d")),
    Case("up: db URL of another database", _up("--db", "mysql://db/x"),
         ("--db", "mysql://db/x", "only sqlite")),
    Case("serve rca: Kafka away", _serve("rca", "--bus", "kafka", "-b", "127.0.0.1:{port}"),
         ("--bootstrap", "127.0.0.1:{port}", "no Kafka broker answers"), taken="closed"),
    Case("serve pipeline: Kafka away",
         _serve("pipeline", "--bus", "kafka", "-b", "127.0.0.1:{port}"),
         ("--bootstrap", "127.0.0.1:{port}", "no Kafka broker answers"), taken="closed"),
    Case("serve pipeline: retention shorter than the late-frame hour",
         _serve("pipeline", "--bus", "memory", "--retention", "10m"),
         ("--retention", "10m", "at least 1h")),
    Case("serve pipeline: retention not a duration",
         _serve("pipeline", "--bus", "memory", "--retention", "a week"),
         ("--retention", "a week", "expected a duration")),
    Case("serve pipeline: upkeep passes too close together",
         _serve("pipeline", "--bus", "memory", "--upkeep-every", "2s"),
         ("--upkeep-every", "2s", "at least 10s")),
    Case("serve pipeline: merge-after not a duration",
         _serve("pipeline", "--bus", "memory", "--merge-after", "soon"),
         ("--merge-after", "soon", "expected a duration")),
    Case("serve api: port taken",
         ("serve", "api", "--db", "sqlite:///{dir}/f.db", "--port", "{port}"),
         ("--port", "{port}", "in use"), taken="tcp"),
    Case("up: gNMI username without a password", _up("--gnmi-username", "admin"),
         ("--gnmi-username", "admin", "FABRICOPS_GNMI_PASSWORD", "--gnmi-password-file")),
    Case("up: gNMI password file missing",
         _up("--gnmi-username", "admin", "--gnmi-password-file", "{dir}/missing.pw"),
         ("--gnmi-password-file", "missing.pw", "No such file")),
    Case("serve sim: gNMI TLS certificate without its key",
         _sim("--gnmi-tls-cert", "{dir}/broken.yaml"),
         ("--gnmi-tls-cert", "--gnmi-tls-key", "go together")),
    Case("serve sim: gNMI TLS certificate not PEM",
         _sim("--gnmi-tls-cert", "{dir}/broken.yaml", "--gnmi-tls-key", "{dir}/broken.yaml"),
         ("--gnmi-tls-cert", "broken.yaml", "not a PEM certificate")),
)


def prepare(folder: Path) -> None:
    """The files the cases read."""
    (folder / "bad-alerts.yaml").write_text(BAD_ALERTS, encoding="utf-8")
    (folder / "broken.yaml").write_text(BROKEN_YAML, encoding="utf-8")
    from fabricops.core.topology import save_topology
    from fabricops.simulator.builders import leaf_spine
    save_topology(leaf_spine(gpus=16), folder / "topology.json")


@contextmanager
def held_port(kind: str) -> Iterator[int]:
    """A loopback port held for the block: listening TCP, bound UDP, or a bound TCP
    socket that does not listen (a connection to it is refused); 0 for none."""
    if not kind:
        yield 0
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if kind == "udp"
                         else socket.SOCK_STREAM)
    with sock:
        sock.bind(("127.0.0.1", 0))
        if kind == "tcp":
            sock.listen()
        yield int(sock.getsockname()[1])


def run_fabricops(args: list[str], folder: Path, timeout_s: float = 60.0) -> Outcome:
    """``python -m fabricops.cli.main ARGS`` in ``folder``, timed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABRICOPS_")}
    env.update({"COLUMNS": "200", "NO_COLOR": "1"})
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "fabricops.cli.main", *args], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=timeout_s,
                          check=False)
    return Outcome(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


Runner = Callable[[list[str], Path], Outcome]


def run_case(case: Case, folder: Path,
             run: Runner = run_fabricops) -> tuple[Outcome, list[str]]:
    """Run ``case`` in ``folder`` (prepared); its outcome and the words to find."""
    with held_port(case.taken) as port:
        fill = {"port": str(port), "dir": str(folder)}
        args = [a.format(**fill) for a in case.args]
        outcome = run(args, folder)
    return outcome, [w.format(**fill) for w in case.names]
