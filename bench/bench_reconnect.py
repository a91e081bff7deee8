"""How soon a device back from an outage is collected again, over gNMI and SNMP.

    python bench/bench_reconnect.py [--down-s 60] [--runs 3]

gNMI: a simulated target streams leaf-1 at 1 s; the target stops for
``--down-s`` (plus a random 0-5 s, so that the return falls anywhere in the
collectors' retry cycle) and starts again on the same port; measured is the time from its
start to the collector's first new frame. SNMP: the poller reads leaf-0 every
10 s through a UDP relay that drops everything for ``--down-s``; measured is
the time from the relay answering again to the first new frame. Default
collector settings throughout (gNMI backoff 0.5 s doubling to 5 s, SNMP down
targets probed every 5 s).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import CollectorRegistry

from fabricops.collectors.gnmi import GnmiCollector
from fabricops.collectors.gnmi_config import GnmiCollectorConfig, GnmiEndpoint
from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, SnmpTarget
from fabricops.core.inventory import SnmpCredentials
from fabricops.core.sinks import ListSink
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.snmp_agent import SnmpAgent, SnmpAgentConfig
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from tests.collectors.gnmi_fabric import serving
from tests.collectors.test_reconnect import Relay


def first_new_frame(sink: ListSink, before: int, timeout_s: float = 120.0) -> float:
    start = time.monotonic()
    while len(sink.frames) <= before:
        if time.monotonic() - start > timeout_s:
            return float("inf")
        time.sleep(0.01)
    return time.monotonic() - start


def gnmi_once(down_s: float) -> float:
    with serving() as fabric:
        sink = ListSink()
        endpoint = GnmiEndpoint(device="leaf-1", address=fabric.target.address,
                                sample_interval_s=1)
        collector = GnmiCollector(GnmiCollectorConfig(targets=(endpoint,)), sink,
                                  registry=CollectorRegistry())
        collector.start()
        try:
            first_new_frame(sink, 0)
            fabric.target.stop()
            time.sleep(down_s)
            before = len(sink.frames)
            fabric.target.start()
            return first_new_frame(sink, before)
        finally:
            collector.stop()


def snmp_once(down_s: float) -> float:
    sim = Simulator(leaf_spine(gpus=64, leaf_radix=16, spine_radix=16), SimConfig(seed=4))
    sim.step()
    board = FrameBoard()
    board.publish(sim.frames())
    agent = SnmpAgent(SnmpAgentConfig(), board, ["leaf-0"])
    agent.start()
    relay = Relay(agent.port)
    sink = ListSink()
    target = SnmpTarget(device="leaf-0", port=relay.port, interval_s=10.0,
                        credentials=SnmpCredentials(community="leaf-0"))
    poller = SnmpPoller(SnmpPollerConfig(targets=(target,)), sink)
    poller.start()
    try:
        first_new_frame(sink, 0)
        relay.mode = "drop"
        time.sleep(down_s)
        before = len(sink.frames)
        relay.mode = "same"
        return first_new_frame(sink, before)
    finally:
        poller.stop()
        relay.close()
        agent.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--down-s", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    results: dict[str, list[float]] = {"gnmi": [], "snmp": []}

    def run(kind: str) -> None:
        once = gnmi_once if kind == "gnmi" else snmp_once
        rng = random.Random(kind)
        for _ in range(args.runs):
            results[kind].append(once(args.down_s + rng.uniform(0, 5)))

    threads = [threading.Thread(target=run, args=(k,)) for k in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"device down {args.down_s:g}-{args.down_s + 5:g} s, then back; time to its first "
          "new frame:")
    for kind, times in results.items():
        print(f"  {kind:5} runs {len(times)}  median {statistics.median(times):5.2f} s  "
              f"max {max(times):5.2f} s  ({', '.join(f'{t:.2f}' for t in times)})")


if __name__ == "__main__":
    main()
