"""UDP receiver of INT telemetry reports: datagrams in, ``IntBatch`` out to a sink.

A thread reads datagrams in batches: it waits for the first one, then drains
the socket without blocking until ``batch_packets`` are in hand or the first
has waited ``max_wait_ms``, parses the batch at once (``parse_packets``) and
hands the reports to the sink. Python has no ``recvmmsg``, so draining is a
loop of non-blocking ``recv``. Malformed packets, and reports holding values
their record cannot (a timestamp past 2**63 ns), are counted by reason and
dropped; a sink that raises is counted and logged (at most every 10 s), and
the loop goes on.
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pydantic import BaseModel, ConfigDict, Field

from fabricops.collectors.int_parse import ParseStats, parse_packets
from fabricops.core.intreport import DEFAULT_INT_UDP_PORT, IntBatch, concat
from fabricops.core.liveness import Liveness

log = logging.getLogger(__name__)
_MAX_DATAGRAM = 65535
_POLL_S = 0.2
_LOG_EVERY_S = 10.0


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
    batch_packets: int = Field(default=1024, ge=1, le=65536,
                               description="Datagrams parsed together at most")
    max_wait_ms: float = Field(default=20.0, gt=0, le=10_000,
                               description="Longest a datagram waits for its batch to fill")
    int_udp_port: int = Field(default=DEFAULT_INT_UDP_PORT, ge=1, le=65535,
                              description="Inner UDP destination port that marks INT")
    rcvbuf_bytes: int = Field(default=8 * 2**20, ge=65536, description="Socket receive buffer")


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


class IntReceiver:
    """Receives INT report datagrams and publishes parsed batches to ``sink``."""

    def __init__(self, config: IntReceiverConfig, sink: IntSink,
                 registry: CollectorRegistry | None = None,
                 liveness: Liveness | None = None) -> None:
        self.config = config
        self.sink = sink
        self.liveness = liveness
        self.registry = registry if registry is not None else CollectorRegistry()
        self._metrics = _Metrics(self.registry)
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._last_log = 0.0
        self.port = 0
        """The bound UDP port (known after ``start``)."""

    def start(self) -> None:
        """Bind the socket (OSError names the address) and start the receive thread."""
        cfg = self.config
        family = socket.AF_INET6 if ":" in cfg.bind_host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, cfg.rcvbuf_bytes)
        try:
            sock.bind((cfg.bind_host, cfg.bind_port))
        except OSError as exc:
            sock.close()
            raise OSError(exc.errno, f"INT receiver cannot bind {cfg.bind_host}:"
                                     f"{cfg.bind_port}: {exc.strerror}") from None
        sock.setblocking(False)
        self._sock, self.port = sock, sock.getsockname()[1]
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="int-receiver", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.liveness is not None:
            self.liveness.forget("int-receiver")

    def handle(self, datagrams: list[bytes], first_arrival: float | None = None) -> ParseStats:
        """Parse one batch of datagrams, count it, and hand its reports to the sink."""
        now_ns = time.time_ns()
        batch, stats = parse_packets(datagrams, int_udp_port=self.config.int_udp_port,
                                     received_ns=now_ns)
        self._count(datagrams, stats)
        if batch.n_reports:
            self._metrics.age.set((now_ns - int(batch.ts_ns.max())) / 1e9)
            try:
                self.sink.publish_int(batch)
            except Exception:
                self._metrics.sink_errors.inc()
                self._log_sink_error()
        if first_arrival is not None:
            self._metrics.lag.observe(time.monotonic() - first_arrival)
        return stats

    def _run(self) -> None:
        """Receive until stopped. A batch that cannot be parsed is counted as malformed
        (``parser_error``) and logged; only a socket that fails for good ends the loop,
        and then the worker is reported dead."""
        if self.liveness is not None:
            self.liveness.alive("int-receiver")
        while not self._stop.is_set():
            try:
                datagrams, first = self._collect()
            except (OSError, ValueError) as exc:  # the socket itself is gone
                if not self._stop.is_set() and self.liveness is not None:
                    self.liveness.dead("int-receiver", f"UDP socket on port {self.port}: {exc}")
                return
            if not datagrams:
                continue
            try:
                self.handle(datagrams, first)
            except Exception:
                self._metrics.malformed.labels("parser_error").inc(len(datagrams))
                self._log_error("INT receiver on port %d: a batch of %d datagrams could not "
                                "be parsed; dropped", self.port, len(datagrams))

    def _collect(self) -> tuple[list[bytes], float]:
        """Wait for a datagram, then drain until the batch is full or has waited enough."""
        sock = self._sock
        assert sock is not None
        out: list[bytes] = []
        if not select.select([sock], [], [], _POLL_S)[0]:
            return out, 0.0
        first = time.monotonic()
        deadline = first + self.config.max_wait_ms / 1000
        limit = self.config.batch_packets
        while len(out) < limit:
            try:
                out.append(sock.recv(_MAX_DATAGRAM))
                continue
            except BlockingIOError:
                pass
            except OSError:
                break
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([sock], [], [], wait)[0]:
                break
        return out, first

    def _count(self, datagrams: list[bytes], stats: ParseStats) -> None:
        m = self._metrics
        m.packets.inc(stats.packets)
        m.bytes.inc(sum(map(len, datagrams)))
        m.reports.inc(stats.reports)
        m.hops.inc(stats.hops)
        m.empty.inc(stats.empty_reports)
        m.batches.inc()
        for reason, n in stats.malformed.items():
            m.malformed.labels(reason).inc(n)
        for reason, n in stats.rejected.items():
            m.rejected.labels(reason).inc(n)

    def _log_sink_error(self) -> None:
        self._log_error("INT receiver on port %d: the sink refused a batch", self.port)

    def _log_error(self, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last_log >= _LOG_EVERY_S:
            self._last_log = now
            log.exception(msg, *args)
