"""SNMP collection of 200 switches x 64 ports: the poller beside net-snmp.

One simulated agent (in its own process) serves 200 switches of 64 ports from a
board that does not advance. Printed, for each way of reading them: seconds for
all 200 switches, varbinds received, varbinds per second, seconds relative to the
poller's full walk, and the reader's own CPU time (the poller's process, or the
snmpbulkwalk processes; the agent's is not counted). Walks read a few rows past
the end of each column, so varbinds exceed the instances served.

- poller, full walk: every column the poller knows (its first poll of a device,
  and every ``describe_every_polls``-th after), SNMPv2c, 32 walks in flight.
- poller, steady: counters, states and sensor values only (its other polls).
- poller, SNMPv3 authPriv (SHA/AES): the steady walk of 20 switches, scaled
  to 200.
- net-snmp ``snmpbulkwalk -Cr32`` of each switch's whole view (``.1``, the same
  tables plus three scalars): one process per switch, 32 at once (the poller's
  concurrency), then one at a time.

    python bench/bench_snmp.py [--switches N] [--ports N]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.synchronize import Event

import numpy as np
from prometheus_client import CollectorRegistry

from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, SnmpTarget
from fabricops.core.frame import Frame
from fabricops.core.inventory import SnmpCredentials
from fabricops.core.sinks import ListSink
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.snmp_agent import SnmpAgent, SnmpAgentConfig
from fabricops.simulator.telemetry import PORT_COUNTERS, PORT_GAUGES, pfc_names

CONCURRENCY = 32
V3 = SnmpCredentials(version="v3", user="fabricops", auth_key="fabricops-auth",
                     priv_key="fabricops-priv")


def switch_frames(switches: int, ports: int, seed: int = 7) -> list[Frame]:
    """Frames laid out like the simulator's switches, with large counters."""
    rng = np.random.default_rng(seed)
    counters = (*PORT_COUNTERS, *pfc_names((3,)))
    names = [*counters, "oper_status", *PORT_GAUGES]
    frames = []
    for s in range(switches):
        entities = [f"sw-{s:03d}:eth{p + 1}" for p in range(ports) for _ in names]
        values: list[int | float] = []
        for _ in range(ports):
            values += rng.integers(0, 2**50, len(counters)).tolist()
            values += [1, 1e5, 2e5, float(rng.uniform(-4, -1)), float(rng.uniform(-2, 0.5)),
                       float(rng.uniform(38, 48))]
        frames.append(Frame.build(f"sw-{s:03d}", 1, "sim", 1, entities, names * ports, values))
    return frames


def serve(switches: int, ports: int, port_out: mp.Queue[int], done: Event) -> None:
    """The agent process: publish the board once, serve until ``done``."""
    board = FrameBoard()
    board.publish(switch_frames(switches, ports))
    agent = SnmpAgent(SnmpAgentConfig(), board, board.devices())
    agent.start()
    port_out.put(agent.port)
    done.wait()
    agent.stop()


def poller_rounds(port: int, devices: list[str], v3: bool = False
                  ) -> list[tuple[float, float, int]]:
    """(seconds, CPU seconds, varbinds) of a full walk, then a steady walk, of ``devices``."""
    targets = tuple(
        SnmpTarget(device=d, port=port, timeout_s=5,
                   credentials=V3.model_copy(update={"context": d}) if v3 else
                   SnmpCredentials(community=d)) for d in devices)
    registry = CollectorRegistry()
    config = SnmpPollerConfig(targets=targets, max_in_flight=CONCURRENCY)
    poller = SnmpPoller(config, ListSink(), registry)
    poller.start(schedule=False)
    rounds = []
    try:
        for _ in range(2):
            before = registry.get_sample_value("fabricops_snmp_varbinds_total") or 0.0
            t0, cpu0 = time.perf_counter(), time.process_time()
            status = poller.collect_once(timeout_s=600)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            after = registry.get_sample_value("fabricops_snmp_varbinds_total") or 0.0
            rounds.append((seconds, cpu, int(after - before)))
    finally:
        poller.stop()
    down = [d for d, s in status.items() if not s.up]
    if down:
        raise SystemExit(f"poller: {len(down)} targets down, first: {status[down[0]].last_error}")
    return rounds


def netsnmp_round(port: int, devices: list[str], workers: int) -> tuple[float, float, int]:
    """(seconds, CPU seconds, varbinds) of a snmpbulkwalk of ``.1`` per device."""
    state = tempfile.mkdtemp(prefix="bench-snmp-")
    env = dict(os.environ, MIBS="", SNMP_PERSISTENT_DIR=state, SNMPCONFPATH=state)

    def walk(device: str) -> int:
        out = subprocess.run(
            ["snmpbulkwalk", "-m", "", "-On", "-Cr32", "-t", "5", "-v2c", "-c", device,
             f"127.0.0.1:{port}", ".1"], capture_output=True, text=True, env=env, check=True)
        return sum(" = " in line and "No more variables" not in line
                   for line in out.stdout.splitlines())

    t0, cpu0 = time.perf_counter(), _children_cpu()
    with ThreadPoolExecutor(workers) as pool:
        varbinds = sum(pool.map(walk, devices))
    seconds, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    shutil.rmtree(state, ignore_errors=True)
    return seconds, cpu, varbinds


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--switches", type=int, default=200)
    parser.add_argument("--ports", type=int, default=64)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    port_q: mp.Queue[int] = ctx.Queue()
    done = ctx.Event()
    agent = ctx.Process(target=serve, args=(args.switches, args.ports, port_q, done),
                        daemon=True)
    agent.start()
    try:
        port = port_q.get(timeout=120)
        run(port, [f"sw-{s:03d}" for s in range(args.switches)], args.ports)
    finally:
        done.set()
        agent.join(timeout=10)


def run(port: int, devices: list[str], ports: int) -> None:
    n, v3_n = len(devices), min(len(devices), 20)
    full, steady = poller_rounds(port, devices)
    _, (v3_s, v3_cpu, v3_vb) = poller_rounds(port, devices[:v3_n], v3=True)
    k = n / v3_n
    rows = [("poller, full walk, v2c", *full), ("poller, steady, v2c", *steady),
            (f"poller, steady, v3 ({v3_n} x{k:g})", v3_s * k, v3_cpu * k, int(v3_vb * k))]
    if shutil.which("snmpbulkwalk"):
        for workers, name in ((CONCURRENCY, f"{CONCURRENCY} at once"), (1, "one at a time")):
            rows.append((f"net-snmp .1, {name}", *netsnmp_round(port, devices, workers)))
    else:
        print("snmpbulkwalk is not installed: no net-snmp rows")
    print(f"{n} switches x {ports} ports, one simulated agent in its own process; "
          "CPU is the reader's own (poller process, or the snmpbulkwalk processes)")
    print(f"{'reader':34} {'seconds':>8} {'varbinds':>9} {'varbinds/s':>11} "
          f"{'s / poller':>10} {'CPU s':>7} {'varbinds/CPU s':>15}")
    for name, seconds, cpu, vb in rows:
        print(f"{name:34} {seconds:8.2f} {vb:9d} {vb / seconds:11.0f} "
              f"{seconds / full[0]:10.2f} {cpu:7.2f} {vb / max(cpu, 1e-9):15.0f}")


if __name__ == "__main__":
    main()
