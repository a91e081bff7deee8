"""How long fabricops' read-only commands take to start and answer, wall and CPU.

A SQLite store is seeded first: 90 s of a simulated k=4 fat-tree through the
pipeline (keyframe segments and key events, a link down for 20 s), two
incidents and two remediation actions. ``fabricops serve api`` is started on
it for ``diagnose``. Each command then runs ``--repeat`` times as a new
process; printed per command: the median wall seconds, the median CPU seconds
of the child (user + system, from ``getrusage(RUSAGE_CHILDREN)``), the fastest
wall time, and whether the median wall time is within ``--budget-s``.
``python -c pass`` is measured in the same run: the floor no command can beat.
A first run of each command, not counted, warms the page cache and writes the
bytecode cache (``PYTHONDONTWRITEBYTECODE`` is cleared for the children).
Wall times include waiting for a core, so run it on an idle machine.

    python bench/bench_cli_start.py [--repeat 9] [--budget-s 0.5]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from fabricops.core.actions import Action, ActionKind, ActionMode, ActionState
from fabricops.core.bus import DEFAULT_PREFIX, Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.membus import MemoryBus
from fabricops.core.records import Diagnosis
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig

FABRICOPS = [sys.executable, "-m", "fabricops.cli.main"]
LINK = "agg-0-0:eth1~leaf-0-0:eth3"
PORT = "leaf-0-0:eth1"
S = 1_000_000_000


def seed(url: str, seconds: int = 90) -> None:
    """Telemetry of a small simulated fabric through the pipeline, then incidents and actions."""
    store = Store(StoreConfig(url=url))
    store.start()
    try:
        sim = Simulator(fat_tree(k=4), SimConfig(seed=1))
        sim.add_job(JobSpec(hosts=12, placement="random", compute_s=0.0,
                            comm_bytes_per_nic=1e15))
        sim.add_fault(FaultSpec(type="link_down", entity=LINK, start_s=30, duration_s=20))
        bus = MemoryBus()
        bus.start()
        config = PipelineConfig(max_future_s=1e9, keyframe_interval_s=60)
        worker = PipelineWorker(config, bus, store)
        sink = BusFrameSink(bus, DEFAULT_PREFIX)
        consumer = bus.subscribe([topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)], config.group)
        for _ in range(seconds):
            sim.step()
            sink.publish_frames(sim.frames())
            worker.process(consumer.poll(0.0, 1_000_000))
            consumer.commit()
        t0 = min(store.segment_watermarks().values())
        store.put_diagnoses([
            Diagnosis(id=f"inc-{i}", ts_ns=t0 + (10 + i) * S, onset_ns=t0, root=LINK,
                      root_kind="link", fault_type="link_down", confidence=0.9)
            for i in range(2)])
        for i, state in enumerate((ActionState.PROPOSED, ActionState.REJECTED)):
            created = t0 + (20 + i) * S
            action = Action(id=f"act-{i}", diagnosis_id="inc-0", created_ns=created,
                            ts_ns=created, kind=ActionKind.DRAIN_LINK, target=LINK,
                            fault_type="link_down", confidence=0.9, mode=ActionMode.APPROVE,
                            ).moved(ActionState.PROPOSED, ts_ns=created, actor="policy")
            if state is not ActionState.PROPOSED:
                action = action.moved(state, ts_ns=created + S, actor="operator:bench")
            store.put_action(action)
    finally:
        store.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_api(db: str, folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``fabricops serve api`` on the seeded store; its process and URL once it answers."""
    topology = folder / "topology.json"
    subprocess.run([*FABRICOPS, "sim", "topology", "build", "fat_tree", "--set", "k=4",
                    "-o", str(topology)], capture_output=True, check=True)
    port = free_port()
    api = subprocess.Popen([*FABRICOPS, "serve", "api", "--topology", str(topology),
                            "--db", db, "--bus", "memory", "--port", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1):
                return api, url
        except OSError:
            time.sleep(0.2)
    api.kill()
    raise SystemExit(f"fabricops serve api did not answer on {url} within 60 s")


def child_env() -> dict[str, str]:
    """The commands' environment: 80 columns, and bytecode cached as on an installed
    system (a PYTHONDONTWRITEBYTECODE inherited from a build shell would make every run
    compile fabricops again, which no user's machine does)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "COLUMNS": "80"}


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and child CPU seconds of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env=child_env())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cases(db: str, api: str) -> list[tuple[str, list[str]]]:
    """(label, argv) of the floor and of each read-only command."""
    store = ["--db", db]
    return [
        ("python -c pass (floor)", [sys.executable, "-c", "pass"]),
        ("fabricops --help", [*FABRICOPS, "--help"]),
        ("fabricops diagnose --api", [*FABRICOPS, "diagnose", "--api", api]),
        ("fabricops actions list --db", [*FABRICOPS, "actions", "list", *store]),
        ("fabricops actions show act-1 --db", [*FABRICOPS, "actions", "show", "act-1", *store]),
        ("fabricops query events --db", [*FABRICOPS, "query", "events", *store]),
        ("fabricops query latest -m temperature_c",
         [*FABRICOPS, "query", "latest", PORT, "-m", "temperature_c", *store]),
        ("fabricops query series out_octets --rate",
         [*FABRICOPS, "query", "series", PORT, "out_octets", "--rate", *store]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--budget-s", type=float, default=0.5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/fabricops.db"
        seed(db)
        api, url = start_api(db, Path(tmp))
        try:
            print(f"{'command':41} {'wall s':>7} {'cpu s':>7} {'min wall':>8} "
                  f"{f'< {args.budget_s:g} s':>8}")
            for label, argv in cases(db, url):
                timed(argv)  # warm the page cache and the bytecode
                runs = [timed(argv) for _ in range(args.repeat)]
                wall = statistics.median(w for w, _ in runs)
                cpu = statistics.median(c for _, c in runs)
                fastest = min(w for w, _ in runs)
                verdict = "yes" if wall < args.budget_s else "NO"
                print(f"{label:41} {wall:7.3f} {cpu:7.3f} {fastest:8.3f} {verdict:>8}")
        finally:
            api.terminate()
            api.wait(timeout=30)


if __name__ == "__main__":
    main()
