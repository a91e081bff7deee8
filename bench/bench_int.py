"""INT hop records parsed per second on one core, and received end to end over UDP.

Packets are Telemetry Report v2.0 with INT-MD stacks as the simulator's exporter
sends them: 5 hops each, instructions node id, L1 ports, hop latency, queue,
ingress and egress timestamps, egress tx utilization (36 bytes per hop).

1. Parsing: ``parse_packets`` over batches of pre-built packets, this process
   pinned to one core.
2. Receive path: a loopback socket is filled with packets, then drained as
   ``IntReceiver`` does (non-blocking ``recv`` until empty) and each batch goes
   through ``IntReceiver.handle`` (parse, metrics, sink); one core.
3. Live: an ``IntReceiver`` on loopback, pinned to one core, while a second
   process (pinned to another core when there is one) sends as fast as it can.
   Reports received per second, and how many the kernel dropped because the
   receiver was behind. A Python sender offers about 150-250k datagrams/s.

    python bench/bench_int.py [--packets N] [--seconds S]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import threading
import time
from typing import Any

import numpy as np

from fabricops.collectors.int_parse import parse_packets
from fabricops.collectors.int_receiver import IntReceiver, IntReceiverConfig
from fabricops.core.intreport import HOP_COLUMNS, INVALID, IntBatch
from fabricops.simulator.agents.int_exporter import DEFAULT_INSTRUCTIONS
from fabricops.simulator.agents.int_wire import encode_packets

HOPS = 5


def make_packets(n: int, per_packet: int = 1, seed: int = 1) -> list[bytes]:
    """``n`` reports, ``per_packet`` of them coalesced in each packet."""
    rng = np.random.default_rng(seed)
    group = np.arange(n) // per_packet
    cols: dict[str, object] = {
        "ts_ns": np.zeros(n), "sink": group % 200 + 1, "seq": group & 0x3FFFFF,
        "src_ip": rng.integers(0, 2**32, n), "dst_ip": rng.integers(0, 2**32, n),
        "sport": rng.integers(49152, 65536, n), "dport": np.full(n, 4791),
        "proto": np.full(n, 17), "flags": np.full(n, 2),
        "instructions": np.full(n, DEFAULT_INSTRUCTIONS), "hop_count": np.full(n, HOPS),
    }
    for name, _, bit in HOP_COLUMNS:
        values = rng.integers(0, min(INVALID[name], 2**62), n * HOPS)
        cols[name] = values if DEFAULT_INSTRUCTIONS & bit else np.full(n * HOPS, INVALID[name])
    return encode_packets(IntBatch.from_columns(cols))


def pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})


def bench_parse(packets: list[bytes], batch: int, repeat: int = 3) -> float:
    """Best of ``repeat`` runs: hop records per second."""
    best = 0.0
    for _ in range(repeat):
        hops = 0
        t = time.perf_counter()
        for i in range(0, len(packets), batch):
            hops += parse_packets(packets[i:i + batch])[1].hops
        best = max(best, hops / (time.perf_counter() - t))
    return best


class CountingSink:
    def __init__(self) -> None:
        self.reports = self.hops = 0
        self.first = self.last = 0.0
        self._lock = threading.Lock()

    def publish_int(self, batch: IntBatch) -> None:
        now = time.perf_counter()
        with self._lock:
            self.first = self.first or now
            self.last = now
            self.reports += batch.n_reports
            self.hops += batch.n_hops


def bench_drain(packets: list[bytes], rounds: int = 10, fill: int = 3000) -> float:
    """Hop records per second through recv + ``IntReceiver.handle`` from a filled socket."""
    sink = CountingSink()
    rx = IntReceiver(IntReceiverConfig(), sink)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 2**20)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.connect(sock.getsockname())
    busy = 0.0
    for r in range(rounds):
        for p in packets[r * fill % len(packets):][:fill]:
            out.send(p)
        t = time.perf_counter()
        batch: list[bytes] = []
        while True:
            try:
                batch.append(sock.recv(65535))
            except BlockingIOError:
                break
            if len(batch) == 1024:
                rx.handle(batch)
                batch = []
        if batch:
            rx.handle(batch)
        busy += time.perf_counter() - t
    sock.close()
    out.close()
    return sink.hops / busy


def blast(port: int, packets: list[bytes], seconds: float, core: int, sent: Any) -> None:
    """Send ``packets`` round and round for ``seconds``; store the count in ``sent``."""
    pin(core)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(("127.0.0.1", port))
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for p in packets[:4096]:
            try:
                sock.send(p)
                n += 1
            except OSError:
                pass
    sent.value = n


def bench_udp(packets: list[bytes], per_packet: int,
              seconds: float) -> tuple[float, float, int]:
    """(hop records received per second, offered hop records per second, reports lost)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    pin(cores[0])
    sink = CountingSink()
    rx = IntReceiver(IntReceiverConfig(batch_packets=2048, max_wait_ms=10), sink)
    rx.start()
    ctx = mp.get_context("spawn")
    sent = ctx.Value("q", 0)
    sender = ctx.Process(
        target=blast, args=(rx.port, packets, seconds, cores[-1], sent))
    sender.start()
    sender.join()
    time.sleep(0.5)
    rx.stop()
    received = sink.reports
    span = max(sink.last - sink.first, 1e-9)
    offered = sent.value * per_packet
    return sink.hops / span, offered * HOPS / seconds, offered - received


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--packets", type=int, default=40_000)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    packets = make_packets(args.packets)
    print(f"{len(packets)} packets of {len(packets[0])} bytes, one report of {HOPS} hops "
          f"each, instructions 0x{DEFAULT_INSTRUCTIONS:04x}")
    pin(sorted(os.sched_getaffinity(0))[0] if hasattr(os, "sched_getaffinity") else 0)
    for batch in (64, 256, 1024, 4096):
        rate = bench_parse(packets, batch)
        print(f"parse, batches of {batch:>5} packets: {rate / 1e6:6.2f} M hop records/s")
    coalesced = make_packets(args.packets, 4)
    for per_packet, sample in ((1, packets), (4, coalesced)):
        rate = bench_drain(sample)
        print(f"receive path, {per_packet} report(s) per packet: {rate / 1e6:6.2f} M hop "
              "records/s (recv + parse + sink, one core)")
    for per_packet, sample in ((1, packets), (4, coalesced)):
        got, offered, lost = bench_udp(sample, per_packet, args.seconds)
        print(f"live UDP, {per_packet} report(s) per packet: {got / 1e6:6.2f} M hop "
              f"records/s received (offered {offered / 1e6:.2f} M/s, {lost} reports lost)")


if __name__ == "__main__":
    main()
