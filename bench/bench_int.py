"""INT hop records decoded per CPU-second, with path variety, and received live over UDP.

Packets are Telemetry Report v2.0 with INT-MD stacks as the simulator's encoder
writes them, one report of 5 hops each. CPU time is ``time.process_time`` of
this process, pinned to one core; every figure is printed beside the one-layout
baseline measured in the same run.

1. Parsing, by layout variety, in batches of 1024 packets and of the
   receiver's default batch: every packet with the exporter's instructions
   (one layout, the baseline); 64 layouts mixed in every batch; a layout never
   seen before in every packet (random instruction bitmaps and domain specific
   words). Then the layout cache's memory after the new-layout run, beside the
   number of layouts it saw.
2. Receive path: a loopback socket is filled, then drained with the receiver's
   batched receive (``recvmmsg``, and ``recv_into`` for comparison): first the
   receive alone (CPU per datagram), then with each batch going through
   ``IntReceiver.handle`` (parse, metrics, sink); one core.
3. Live: an ``IntReceiver`` (1 socket, and its default count for this
   machine's cores) pinned to one core while a second process (pinned to the
   other core when there is one) sends from 16 source ports at a paced rate,
   and then as fast as Python can. Hop records received per second (first to
   last batch), offered per second, and reports lost (sent minus received).

    python bench/bench_int.py [--packets N] [--seconds S] [--skip-live]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import threading
import time
import tracemalloc
from typing import Any

import numpy as np

from fabricops.collectors.int_layouts import LayoutCache
from fabricops.collectors.int_parse import parse_packets
from fabricops.collectors.int_receiver import IntReceiver, IntReceiverConfig, default_sockets
from fabricops.collectors.int_socket import DatagramSocket, ReceiveCall, open_sockets
from fabricops.core.intreport import HOP_COLUMNS, INVALID, IntBatch
from fabricops.simulator.agents.int_exporter import DEFAULT_INSTRUCTIONS
from fabricops.simulator.agents.int_wire import WireOptions, encode_packets

HOPS = 5
BATCH = 1024
"""Packets per parse call in the parse table (the batch of the figures it is compared to)."""
RECEIVER_BATCH = IntReceiverConfig.model_fields["batch_packets"].default
SENDER_PORTS = 16
SOCKETS = default_sockets()
"""The receiver's default socket count on this machine (before this process is pinned)."""
CORES = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
"""The cores this process may use, as it starts."""


def make_packets(n: int, per_packet: int = 1, seed: int = 1,
                 instructions: Any = DEFAULT_INSTRUCTIONS, ds_words: int = 0) -> list[bytes]:
    """``n`` reports, ``per_packet`` of them coalesced in each packet."""
    rng = np.random.default_rng(seed)
    group = np.arange(n) // per_packet
    bits = np.broadcast_to(np.asarray(instructions), (n,))
    cols: dict[str, object] = {
        "ts_ns": np.zeros(n), "sink": group % 200 + 1, "seq": group & 0x3FFFFF,
        "src_ip": rng.integers(0, 2**32, n), "dst_ip": rng.integers(0, 2**32, n),
        "sport": rng.integers(49152, 65536, n), "dport": np.full(n, 4791),
        "proto": np.full(n, 17), "flags": np.full(n, 2),
        "instructions": bits, "hop_count": np.full(n, HOPS),
    }
    hop_bits = np.repeat(bits, HOPS)
    for name, _, bit in HOP_COLUMNS:
        values = rng.integers(0, min(INVALID[name], 2**62), n * HOPS)
        cols[name] = np.where(hop_bits & bit, values, INVALID[name])
    options = WireOptions(domain_specific_id=7 if ds_words else 0, ds_words_per_hop=ds_words)
    return encode_packets(IntBatch.from_columns(cols), options)


def varied_packets(n: int, layouts: int | None, seed: int = 2) -> list[bytes]:
    """``n`` packets over ``layouts`` layouts, shuffled (``None``: a new layout each).

    A layout is a random instruction bitmap with 0-7 domain specific words per hop.
    """
    rng = np.random.default_rng(seed)
    count = n if layouts is None else layouts
    key = rng.choice(np.arange(1, 65536 * 8), count, replace=False)
    bits, ds_words = key % 65536, key // 65536
    bits = np.where(bits == 0, 0x8000, bits)
    pick = np.arange(n) if layouts is None else rng.integers(0, count, n)
    out: list[bytes] = []
    for ds in range(8):
        rows = np.flatnonzero(ds_words[pick] == ds)
        if len(rows):
            out += make_packets(len(rows), seed=seed + ds, instructions=bits[pick[rows]],
                                ds_words=ds)
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})


def bench_parse(packets: list[bytes], layouts: LayoutCache, batch: int = BATCH,
                repeat: int = 3) -> float:
    """Best of ``repeat`` runs: hop records per CPU-second, batches of ``batch`` packets."""
    best = 0.0
    for _ in range(repeat):
        hops = 0
        t = time.process_time()
        for i in range(0, len(packets), batch):
            hops += parse_packets(packets[i:i + batch], layouts=layouts)[1].hops
        best = max(best, hops / max(time.process_time() - t, 1e-9))
    return best


def cache_memory(packets: list[bytes], capacity: int) -> tuple[int, int, int]:
    """(layouts looked up, cache bytes, peak bytes traced while parsing) for new layouts."""
    cache = LayoutCache(capacity)
    misses = 0
    tracemalloc.start()
    for i in range(0, len(packets), BATCH):
        misses += parse_packets(packets[i:i + BATCH], layouts=cache)[1].layouts.misses
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return misses, cache.nbytes, peak


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


def bench_drain(packets: list[bytes], call: ReceiveCall, rounds: int = 10,
                fill: int = 6000) -> float:
    """Hop records per CPU-second: batched receive + ``IntReceiver.handle``, filled socket."""
    sink = CountingSink()
    rx = IntReceiver(IntReceiverConfig(), sink)
    (sock,) = open_sockets("127.0.0.1", 0, 1, 64 * 2**20)
    reader = DatagramSocket(sock, RECEIVER_BATCH, 9216, call)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.connect(sock.getsockname())
    busy = 0.0
    for r in range(rounds):
        for p in packets[r * fill % len(packets):][:fill]:
            out.send(p)
        t = time.process_time()
        while True:
            got = reader.receive()
            if not len(got.datagrams):
                break
            rx.handle(got.datagrams)
        busy += time.process_time() - t
    sock.close()
    out.close()
    return sink.hops / busy


def bench_receive(packets: list[bytes], call: ReceiveCall, rounds: int = 10) -> float:
    """CPU microseconds per datagram for the batched receive alone, from a filled socket."""
    (sock,) = open_sockets("127.0.0.1", 0, 1, 64 * 2**20)
    reader = DatagramSocket(sock, RECEIVER_BATCH, 9216, call)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.connect(sock.getsockname())
    busy, n = 0.0, 0
    for r in range(rounds + 1):  # the first round touches the buffer's pages: not counted
        for p in packets[:6000]:
            out.send(p)
        t = time.process_time()
        while got := len(reader.receive().datagrams):
            n += got if r else 0
        busy += time.process_time() - t if r else 0.0
    sock.close()
    out.close()
    return busy / max(n, 1) * 1e6


def blast(port: int, packets: list[bytes], rate_pps: float, seconds: float, core: int,
          sent: Any) -> None:
    """Send ``packets`` round and round from several ports at ``rate_pps`` (0: as fast as
    possible) for ``seconds``; store the count in ``sent``."""
    pin(core)
    socks = []
    for _ in range(SENDER_PORTS):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("127.0.0.1", port))
        socks.append(s)
    sample = packets[:4096]
    n, failed, start = 0, 0, time.perf_counter()
    end = start + seconds
    while (now := time.perf_counter()) < end:
        due = len(sample) if not rate_pps else min(int((now - start) * rate_pps) - n, 4096)
        for i in range(due):
            try:
                socks[i % SENDER_PORTS].send(sample[(n + i) % len(sample)])
            except OSError:
                failed += 1
        n += max(due, 0)
        if rate_pps and due < 64:
            time.sleep(0.0002)
    sent.value = n - failed


def kernel_drops(port: int) -> int:
    """Datagrams the kernel dropped on the UDP sockets bound to ``port`` (Linux)."""
    try:
        with open("/proc/net/udp") as table:
            rows = [line.split() for line in table.readlines()[1:]]
    except OSError:
        return -1
    return sum(int(r[-1]) for r in rows if int(r[1].split(":")[1], 16) == port)


def bench_udp(packets: list[bytes], per_packet: int, offered_hops: float, seconds: float,
              sockets: int) -> tuple[float, float, int, int, float]:
    """(hop records received per second, offered per second, reports lost, datagrams the
    kernel dropped, hop records received per receiver CPU-second)."""
    pin(CORES[0])
    sink = CountingSink()
    rx = IntReceiver(IntReceiverConfig(max_wait_ms=10, sockets=sockets), sink)
    rx.start()
    cpu = time.process_time()
    ctx = mp.get_context("spawn")
    sent = ctx.Value("q", 0)
    sender = ctx.Process(target=blast, args=(
        rx.port, packets, offered_hops / HOPS / per_packet, seconds, CORES[-1], sent))
    sender.start()
    sender.join()
    time.sleep(0.5)
    drops = kernel_drops(rx.port)
    rx.stop()
    cpu = time.process_time() - cpu
    span = max(sink.last - sink.first, 1e-9)
    offered = sent.value * per_packet
    return sink.hops / span, offered * HOPS / seconds, offered - sink.reports, drops, \
        sink.hops / max(cpu, 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--packets", type=int, default=40_000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--skip-live", action="store_true")
    args = parser.parse_args()
    n = args.packets
    print(f"reports of {HOPS} hops, one core, CPU time")
    cases = {"1 layout (baseline)": make_packets(n), "64 layouts": varied_packets(n, 64),
             "new layout every packet": varied_packets(n // 2, None)}
    pin(CORES[0])
    base = 0.0
    sizes = (BATCH, RECEIVER_BATCH)
    print(f"{'parse, M hops/CPU-s':<28}" + "".join(
        f"{f'{b} pkts/batch':>16}{'x baseline':>12}" for b in sizes))
    for name, packets in cases.items():
        rates = [bench_parse(packets, LayoutCache(), b) for b in sizes]
        base = base or rates[0]
        print(f"{name:<28}" + "".join(f"{r / 1e6:>16.2f}{r / base:>12.2f}" for r in rates))
    seen, cache_bytes, peak = cache_memory(cases["new layout every packet"], 4096)
    print(f"layout cache after {seen} new layouts: {cache_bytes / 1024:.0f} KiB "
          f"(capacity 4096, fixed); peak traced while parsing {peak / 2**20:.1f} MiB")
    coalesced = make_packets(n, 4)
    calls: tuple[ReceiveCall, ...] = ("recvmmsg", "recv_into")
    for call in calls:
        cost = bench_receive(cases["1 layout (baseline)"], call)
        print(f"receive only ({call}): {cost:.2f} CPU-us per datagram")
    for call in calls:
        for per_packet, sample in ((1, cases["1 layout (baseline)"]), (4, coalesced)):
            rate = bench_drain(sample, call)
            print(f"receive path ({call}), {per_packet} report(s)/packet: {rate / 1e6:6.2f} "
                  "M hops/CPU-s (receive + parse + sink)")
    if args.skip_live:
        return
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0,)
    print(f"live UDP; load average {load[0]:.1f} on {len(CORES)} cores (other work shares them)")
    print(f"{'':<30}{'sockets':>8}{'offered':>9}{'received':>10}{'lost':>9}{'kernel':>9}"
          f"{'M hops/':>9}")
    print(f"{'':<30}{'':>8}{'M hops/s':>9}{'M hops/s':>10}{'reports':>9}{'drops':>9}"
          f"{'CPU-s':>9}")
    runs = [(1, s, r) for s in sorted({1, SOCKETS}) for r in (0.5e6, 1.0e6, 1.5e6, 0)]
    runs += [(4, SOCKETS, r) for r in (1.0e6, 2.0e6, 0)]
    for per_packet, n_sockets, rate in runs:
        sample = cases["1 layout (baseline)"] if per_packet == 1 else coalesced
        got, offered, lost, drops, busy = bench_udp(sample, per_packet, rate, args.seconds,
                                                    n_sockets)
        name = f"{per_packet} report(s)/packet" + ("" if rate else ", flat out")
        print(f"{name:<30}{n_sockets:>8}{offered / 1e6:>9.2f}{got / 1e6:>10.2f}{lost:>9}"
              f"{drops:>9}{busy / 1e6:>9.2f}")


if __name__ == "__main__":
    main()
