"""UDP receiver of INT telemetry reports: datagrams in, ``IntBatch`` out to a sink.

``sockets`` UDP sockets share the port (SO_REUSEPORT; the kernel spreads
exporters over them by flow hash), each read by its own thread. A thread waits
for a datagram, then reads without blocking, in batches (``recvmmsg`` where the
C library has it, else ``recv_into``), into a buffer allocated once, until
``batch_packets`` are in hand or the first has waited ``max_wait_ms``; it
parses the batch at once (``parse_packets``, with one ``LayoutCache`` shared by
the threads) and hands the reports to the sink, one thread at a time.
Malformed packets, datagrams longer than ``max_datagram_bytes``, and reports
holding values their record cannot (a timestamp past 2**63 ns) are counted by
reason and dropped, and so are the datagrams the kernel dropped for want of
buffer (``kernel_drops``, Linux); a batch the parser fails on is counted as ``parser_error``;
a sink that raises is counted and logged (at most every 10 s); the loop goes on.
A socket that fails for good ends its thread, and liveness names it dead.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pydantic import BaseModel, ConfigDict, Field

from fabricops.collectors.int_headers import Datagrams
from fabricops.collectors.int_layouts import DEFAULT_CAPACITY, LayoutCache
from fabricops.collectors.int_parse import ParseStats, parse_packets
from fabricops.collectors.int_socket import DatagramSocket, ReceiveCall, Received, open_sockets
from fabricops.core.intreport import DEFAULT_INT_UDP_PORT, IntBatch, concat
from fabricops.core.liveness import Liveness

log = logging.getLogger(__name__)
_POLL_S = 0.2
_LOG_EVERY_S = 10.0
_WORKER = "int-receiver"


def default_sockets() -> int:
    """One socket per core, 1 to 4: threads past the core count only add switching."""
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


class IntSink(Protocol):
    """Accepts batches of INT reports."""

    def publish_int(self, batch: IntBatch) -> None: ...


class IntListSink:
    """A thread-safe IntSink that keeps every batch, for tests and tools."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.batches: list[IntBatch] = []

    def publish_int(self, batch: IntBatch) -> None:
        with self._lock:
            self.batches.append(batch)

    def batch(self) -> IntBatch:
        """Everything received so far, as one batch."""
        with self._lock:
            return concat(list(self.batches))

    def n_reports(self) -> int:
        with self._lock:
            return sum(b.n_reports for b in self.batches)


class IntReceiverConfig(BaseModel):
    """Where to listen and how to batch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bind_host: str = "127.0.0.1"
    bind_port: int = Field(default=0, ge=0, le=65535, description="0: any free port")
    batch_packets: int = Field(
        default=4096, ge=1, le=65536,
        description="Datagrams parsed together at most (larger batches cost less per hop)")
    max_wait_ms: float = Field(default=20.0, gt=0, le=10_000,
                               description="Longest a datagram waits for its batch to fill")
    int_udp_port: int = Field(default=DEFAULT_INT_UDP_PORT, ge=1, le=65535,
                              description="Inner UDP destination port that marks INT")
    rcvbuf_bytes: int = Field(default=32 * 2**20, ge=65536, le=2**31 - 1,
                              description="Receive buffer asked for each socket")
    sockets: int = Field(default_factory=default_sockets, ge=1, le=64,
                         description="Sockets sharing the port (SO_REUSEPORT), a thread each")
    receive_call: ReceiveCall = Field(
        default="auto", description="recvmmsg, recv_into, or auto (recvmmsg where it exists)")
    max_datagram_bytes: int = Field(
        default=9216, ge=64, le=65535,
        description="Longest datagram kept (a jumbo frame's payload); each socket reads "
                    "into batch_packets slots of this size (memory is touched only as far "
                    "as datagrams reach)")
    layout_cache_size: int = Field(default=DEFAULT_CAPACITY, ge=1, le=2**20,
                                   description="Hop layouts kept (least recently used go)")


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(f"fabricops_int_receiver_{name}", doc, labels, registry=registry)

        self.packets = counter("packets", "Datagrams received")
        self.bytes = counter("bytes", "UDP payload bytes received")
        self.reports = counter("reports", "INT reports parsed and handed on")
        self.hops = counter("hop_records", "INT hop records parsed and handed on")
        self.empty = counter("empty_reports", "Well-formed reports with nothing to hand on")
        self.malformed = counter("malformed_packets", "Datagrams dropped, by reason",
                                 ("reason",))
        self.rejected = counter("rejected_reports",
                                "Reports of well-formed datagrams dropped, by reason",
                                ("reason",))
        self.batches = counter("batches", "Batches parsed")
        self.sink_errors = counter("sink_errors", "Batches the sink refused")
        self.lag = Histogram(
            "fabricops_int_receiver_lag_seconds",
            "From a batch's first datagram arriving to the batch handed to the sink",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=registry)
        self.age = Gauge("fabricops_int_receiver_report_age_seconds",
                         "Receive time minus the newest report timestamp of the last batch",
                         registry=registry)
        self.socket_packets = counter("socket_packets", "Datagrams received, by socket",
                                      ("socket",))
        self.kernel_drops = counter(
            "kernel_drops", "Datagrams the kernel dropped, the socket's buffer being full",
            ("socket",))
        self.layout_hits = counter("layout_cache_hits",
                                   "Distinct hop layouts of a batch found in the cache")
        self.layout_misses = counter("layout_cache_misses",
                                     "Distinct hop layouts of a batch computed anew")
        self.layout_evictions = counter("layout_cache_evictions",
                                        "Hop layouts pushed out of the full cache")
        self.layout_entries = Gauge("fabricops_int_receiver_layout_cache_entries",
                                    "Hop layouts in the cache", registry=registry)


class IntReceiver:
    """Receives INT report datagrams and publishes parsed batches to ``sink``."""

    def __init__(self, config: IntReceiverConfig, sink: IntSink,
                 registry: CollectorRegistry | None = None,
                 liveness: Liveness | None = None) -> None:
        self.config = config
        self.sink = sink
        self.liveness = liveness
        self.registry = registry if registry is not None else CollectorRegistry()
        self.layouts = LayoutCache(config.layout_cache_size)
        self._metrics = _Metrics(self.registry)
        self._readers: list[DatagramSocket] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._sink_lock = threading.Lock()
        self._last_log = 0.0
        self.port = 0
        """The bound UDP port (known after ``start``)."""

    def start(self) -> None:
        """Bind the sockets (OSError names the address) and start a thread for each."""
        cfg = self.config
        socks = open_sockets(cfg.bind_host, cfg.bind_port, cfg.sockets, cfg.rcvbuf_bytes)
        try:
            self._readers = [DatagramSocket(s, cfg.batch_packets, cfg.max_datagram_bytes,
                                            cfg.receive_call) for s in socks]
        except (ValueError, MemoryError):
            for sock in socks:
                sock.close()
            raise
        self.port = socks[0].getsockname()[1]
        self._stop.clear()
        if self.liveness is not None:
            self.liveness.alive(_WORKER)
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True,
                                          name=f"{_WORKER}-{i}")
                         for i in range(len(self._readers))]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads = []
        for reader in self._readers:
            reader.sock.close()
        self._readers = []
        if self.liveness is not None:
            self.liveness.forget(_WORKER)

    def handle(self, datagrams: Sequence[bytes] | Datagrams,
               first_arrival: float | None = None) -> ParseStats:
        """Parse one batch of datagrams, count it, and hand its reports to the sink."""
        now_ns = time.time_ns()
        batch, stats = parse_packets(datagrams, int_udp_port=self.config.int_udp_port,
                                     received_ns=now_ns, layouts=self.layouts)
        self._count(datagrams, stats)
        if batch.n_reports:
            self._metrics.age.set((now_ns - int(batch.ts_ns.max())) / 1e9)
            try:
                with self._sink_lock:
                    self.sink.publish_int(batch)
            except Exception:
                self._metrics.sink_errors.inc()
                self._log_sink_error()
        if first_arrival is not None:
            self._metrics.lag.observe(time.monotonic() - first_arrival)
        return stats

    def _run(self, index: int) -> None:
        """Receive on socket ``index`` until stopped. A batch that cannot be parsed is
        counted as malformed (``parser_error``) and logged; only a socket that fails for
        good (or anything past parsing fails) ends the loop, and then the worker is
        reported dead."""
        try:
            self._receive(index)
        except Exception as exc:
            if not self._stop.is_set():
                log.exception("INT receiver on port %d: socket %d gave up", self.port, index)
                if self.liveness is not None:
                    self.liveness.dead(_WORKER,
                                       f"UDP socket {index} on port {self.port}: {exc}")

    def _receive(self, index: int) -> None:
        reader = self._readers[index]
        poller = select.poll()
        poller.register(reader.sock, select.POLLIN)
        label = str(index)
        drops = reader.kernel_drops() or 0
        while not self._stop.is_set():
            received, first = self._collect(reader, poller)
            datagrams = received.datagrams
            self._count_received(label, len(datagrams), received.too_long)
            drops = self._count_drops(label, reader, drops)
            if not len(datagrams):
                continue
            try:
                self.handle(datagrams, first)
            except Exception:
                self._metrics.malformed.labels("parser_error").inc(len(datagrams))
                self._log_error("INT receiver on port %d: a batch of %d datagrams could not "
                                "be parsed; dropped", self.port, len(datagrams))

    def _collect(self, reader: DatagramSocket, poller: select.poll) -> tuple[Received, float]:
        """Wait for a datagram, then read until the batch is full or has waited enough."""
        if not poller.poll(_POLL_S * 1000):
            return reader.take(), 0.0
        first = time.monotonic()
        deadline = first + self.config.max_wait_ms / 1000
        limit = self.config.batch_packets
        while reader.fill(limit) < limit:
            wait = deadline - time.monotonic()
            if wait <= 0 or not poller.poll(wait * 1000):
                break
        return reader.take(), first

    def _count_received(self, label: str, kept: int, too_long: int) -> None:
        m = self._metrics
        if kept + too_long:
            m.socket_packets.labels(label).inc(kept + too_long)
        if too_long:
            m.packets.inc(too_long)
            m.malformed.labels("datagram_too_long").inc(too_long)

    def _count_drops(self, label: str, reader: DatagramSocket, before: int) -> int:
        """Count the kernel's drops on ``reader`` since ``before``; return the new total."""
        now = reader.kernel_drops()
        if now is None:
            return before
        if now != before:
            self._metrics.kernel_drops.labels(label).inc((now - before) % 2**32)
        return now

    def _count(self, datagrams: Sequence[bytes] | Datagrams, stats: ParseStats) -> None:
        m = self._metrics
        m.packets.inc(stats.packets)
        m.bytes.inc(datagrams.nbytes if isinstance(datagrams, Datagrams)
                    else sum(map(len, datagrams)))
        m.reports.inc(stats.reports)
        m.hops.inc(stats.hops)
        m.empty.inc(stats.empty_reports)
        m.batches.inc()
        for reason, n in stats.malformed.items():
            m.malformed.labels(reason).inc(n)
        for reason, n in stats.rejected.items():
            m.rejected.labels(reason).inc(n)
        looked = stats.layouts
        m.layout_hits.inc(looked.hits)
        m.layout_misses.inc(looked.misses)
        m.layout_evictions.inc(looked.evictions)
        m.layout_entries.set(len(self.layouts))

    def _log_sink_error(self) -> None:
        self._log_error("INT receiver on port %d: the sink refused a batch", self.port)

    def _log_error(self, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last_log >= _LOG_EVERY_S:
            self._last_log = now
            log.exception(msg, *args)
