"""Varbinds asked for and received per poll: describe once, then values only.

A real snmpsim agent serves the recorded 400-port switch
(``tests/collectors/walks/switch_400port.snmprec``: ifTable/ifXTable with HC
counters, per-priority PFC counters) on loopback. The poller polls it ``--polls``
times; printed per poll: whether it described the device, requests, varbinds the
requests asked for (columns x repetitions, the most they could bring back),
varbinds received, the poller's CPU time (time.process_time of this process; the
agent runs in its own) and wall time. The baseline, measured in the same run, is
the same poller describing on every poll (``describe_every_polls=1``), as the
poller did before it learnt to ask for values only.

    python bench/bench_snmp_varbinds.py [--polls 3] [--max-varbinds-answered N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, SnmpTarget
from fabricops.core.inventory import SnmpCredentials
from fabricops.core.sinks import ListSink
from tests.collectors.snmprec import WALKS, snmpsim_agent

DEVICE = "switch_400port"


def run(port: int, polls: int, every: int | None) -> list[tuple[object, ...]]:
    target = SnmpTarget(device="sw", port=port, timeout_s=10.0,
                        credentials=SnmpCredentials(community=DEVICE))
    sink = ListSink()
    poller = SnmpPoller(SnmpPollerConfig(targets=(target,), describe_every_polls=every), sink,
                        CollectorRegistry())
    poller.start(schedule=False)
    rows: list[tuple[object, ...]] = []
    try:
        for n in range(1, polls + 1):
            cpu, wall = time.process_time(), time.perf_counter()
            status = poller.collect_once()["sw"]
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            walk = status.last_walk
            if not status.up or walk is None:
                raise SystemExit(f"poll {n} failed: {status.last_error}")
            rows.append((n, "yes" if walk.described else "no", walk.requests,
                         walk.varbinds_requested, walk.varbinds_received,
                         sink.frames[-1].n_samples, f"{cpu:.3f}", f"{wall:.3f}"))
    finally:
        poller.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--polls", type=int, default=3)
    parser.add_argument("--max-varbinds-answered", type=int, default=None,
                        help="cut the agent's GETBULK answers after N varbinds")
    args = parser.parse_args()
    head = ("poll", "described", "requests", "varbinds asked", "varbinds received", "samples",
            "cpu s", "wall s")
    with snmpsim_agent(WALKS, max_varbinds=args.max_varbinds_answered) as agent:
        tables = {"describe once, then values only": run(agent.port, args.polls, None),
                  "baseline: describe every poll": run(agent.port, args.polls, 1)}
    print(f"{DEVICE}: 400 ports, snmpsim agent"
          + (f" answering at most {args.max_varbinds_answered} varbinds"
             if args.max_varbinds_answered else ""))
    widths = [max(len(h), 10) for h in head]
    for title, rows in tables.items():
        print(f"\n{title}")
        print("  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)))
        for row in rows:
            print("  ".join(str(v).rjust(w) for v, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
