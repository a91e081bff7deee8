"""gNMI samples per second received by the collector from one simulated target.

A child process runs a leaf-spine fabric (64-port switches) in real time and
serves ``--switches`` of its switches from one gNMI target; this process runs
the gNMI collector with ``--streams`` STREAM/SAMPLE subscriptions (spread over
the switches, each asking for every catalogue port leaf) and counts what
reaches its sink. Sampling is every ``--tick-s`` of simulated time (one frame
per tick), played at ``--speed`` times real time. Prints samples/s received
against the rate asked for, frames/s, the CPU seconds per second of both
processes, the collector's publish lag and its error count.

    python bench/bench_gnmi.py [--streams N] [--switches N] [--tick-s S] [--speed X]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection

from prometheus_client import CollectorRegistry

from fabricops.collectors.gnmi import GnmiCollector
from fabricops.collectors.gnmi_config import GnmiCollectorConfig, GnmiEndpoint
from fabricops.core.frame import Frame

PORTS = 64
LEAVES_PER_PORT = 18  # 10 counters, 2 PFC, oper-status, 5 gauges


def serve(switches: int, tick_s: float, speed: float, conn: Connection) -> None:
    """Child process: simulate, serve over gNMI, report the port, wait, report CPU."""
    from fabricops.simulator.agents.board import FrameBoard
    from fabricops.simulator.agents.driver import DriverConfig, SimulationDriver
    from fabricops.simulator.agents.gnmi_target import GnmiTarget, GnmiTargetConfig
    from fabricops.simulator.builders import leaf_spine
    from fabricops.simulator.engine import SimConfig, Simulator
    from fabricops.simulator.workload import JobSpec

    topo = leaf_spine(gpus=max(64, switches * 32))
    sim = Simulator(topo, SimConfig(seed=1, tick_s=tick_s))
    sim.add_job(JobSpec(hosts=len(list(topo.hosts())) // 2, placement="random",
                        compute_s=0.0, comm_bytes_per_nic=1e15))
    served = [n.id for n in topo.switches()][:switches]
    board = FrameBoard()
    driver = SimulationDriver(sim, board, DriverConfig(speed=speed))
    target = GnmiTarget(GnmiTargetConfig(max_rpcs=1024), board, served)
    driver.start()
    target.start()
    conn.send((target.address, served))
    conn.recv()
    cpu = _cpu_s()
    conn.send(cpu)
    conn.recv()
    conn.send(_cpu_s() - cpu)
    conn.recv()
    target.stop()
    driver.stop()


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CountingSink:
    """A FrameSink that only counts."""

    def __init__(self) -> None:
        self.frames = 0
        self.samples = 0
        self.newest_ns = 0
        self._lock = threading.Lock()

    def publish_frames(self, frames: Sequence[Frame]) -> None:
        with self._lock:
            self.frames += len(frames)
            self.samples += sum(f.n_samples for f in frames)
            self.newest_ns = max(self.newest_ns, *(f.ts_ns for f in frames))


def endpoints(address: str, served: list[str], streams: int,
              interval_s: float) -> list[GnmiEndpoint]:
    """``streams`` subscriptions spread over ``served``, each under its own device id."""
    return [GnmiEndpoint(device=f"{served[i % len(served)]}.{i // len(served)}",
                         target=served[i % len(served)], address=address,
                         sample_interval_s=interval_s) for i in range(streams)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--switches", type=int, default=64)
    parser.add_argument("--tick-s", type=float, default=1.0, help="Simulated s per sample")
    parser.add_argument("--speed", type=float, default=1.0, help="Simulated s per wall s")
    parser.add_argument("--seconds", type=float, default=10.0, help="Measured wall time")
    args = parser.parse_args()

    ours, theirs = mp.Pipe()
    child = mp.get_context("spawn").Process(
        target=serve, args=(args.switches, args.tick_s, args.speed, theirs), daemon=True)
    child.start()
    address, served = ours.recv()
    registry = CollectorRegistry()
    sink = CountingSink()
    config = GnmiCollectorConfig(targets=tuple(endpoints(address, served, args.streams,
                                                         args.tick_s)))
    collector = GnmiCollector(config, sink, registry=registry)
    collector.start()
    time.sleep(max(3.0, 3 * args.tick_s / args.speed))  # every stream past its first sync
    ours.send("start")
    ours.recv()
    start_samples, start_frames, start_cpu = sink.samples, sink.frames, _cpu_s()
    start_ns, t0 = sink.newest_ns, time.perf_counter()
    time.sleep(args.seconds)
    wall = time.perf_counter() - t0
    samples, frames = sink.samples - start_samples, sink.frames - start_frames
    ticks = (sink.newest_ns - start_ns) / 1e9 / args.tick_s
    collector_cpu = _cpu_s() - start_cpu
    ours.send("measured")
    target_cpu = ours.recv()
    collector.stop()
    ours.send("exit")
    child.join(timeout=10)
    report(args, len(served), wall, samples, frames, ticks, collector_cpu, target_cpu, registry)


def report(args: argparse.Namespace, switches: int, wall: float, samples: int, frames: int,
           ticks: float, collector_cpu: float, target_cpu: float,
           registry: CollectorRegistry) -> None:
    """``ticks``: simulated sample periods that passed while measuring."""
    asked = args.streams * PORTS * LEAVES_PER_PORT * ticks / wall
    lag_sum = registry.get_sample_value("fabricops_gnmi_publish_lag_seconds_sum") or 0.0
    lag_n = registry.get_sample_value("fabricops_gnmi_publish_lag_seconds_count") or 1.0
    errors: dict[str, float] = {}
    for metric in registry.collect():
        for s in metric.samples:
            if s.name == "fabricops_gnmi_errors_total":
                errors[s.labels["reason"]] = errors.get(s.labels["reason"], 0) + s.value
    print(f"gNMI: 1 target, {switches} switches x {PORTS} ports, {args.streams} streams, "
          f"sample every {args.tick_s:g} s simulated at {args.speed:g}x "
          f"({args.tick_s / args.speed:g} s wall)")
    print(f"  received {samples / wall:12,.0f} samples/s  (asked {asked:,.0f}; "
          f"{100 * samples / wall / asked:5.1f} %)   {frames / wall:8.1f} frames/s")
    print(f"  CPU: collector {collector_cpu / wall:4.2f} s/s, target+simulator "
          f"{target_cpu / wall:4.2f} s/s   publish lag mean {1e3 * lag_sum / lag_n:6.2f} ms   "
          f"errors {errors or 0}")


if __name__ == "__main__":
    main()
