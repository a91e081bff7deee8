"""PlatformMetrics: health of the platform itself, read at scrape time.

A prometheus-client collector that yields, when scraped:

- from the collection status (if given): ``fabricops_collector_targets{protocol}``,
  ``fabricops_collector_targets_up{protocol}`` (the protocols the status lists),
  ``fabricops_collector_frames_total{protocol}`` and
  ``fabricops_collector_samples_total{protocol}`` (snmp, gnmi, int; zero when
  none), ``fabricops_collector_int_reports_total``;
- from the newest frame time the pipeline accepted (if given):
  ``fabricops_pipeline_lag_seconds``, wall clock minus that time (negative if
  the frames are stamped ahead of this host's clock);
- from the store (read-only, :mod:`fabricops.store.stats`):
  ``fabricops_store_size_bytes``, ``fabricops_store_rows{table}``,
  ``fabricops_compression_ratio`` (once a segment is stored),
  ``fabricops_diagnoses_active{fault_type}`` (the twelve fault types always,
  ``other`` for any other type when it has incidents) and
  ``fabricops_actions{state}`` (all seven states).

Store figures are read at most once per ``cache_s`` whatever the scrape rate;
a failed read is counted in ``fabricops_platform_metrics_errors_total``,
logged, and leaves the store figures out of that scrape. Before ``start`` and
after ``stop`` the store is not read.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine

from fabricops.collectors.collection import PROTOCOLS, CollectionStatus
from fabricops.core.faults import FaultType
from fabricops.core.records import Event
from fabricops.store.stats import StatsError, StoreStats, read_stats
from fabricops.store.store import Store

log = logging.getLogger(__name__)
OTHER_FAULT = "other"


class PlatformMetricsConfig(BaseModel):
    """How often the store is read and what counts as an active incident."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cache_s: float = Field(default=5.0, ge=0, description="Store figures are reused this long")
    active_window_s: float = Field(default=90.0, gt=0, description=(
        "An incident whose newest revision is older than this has cleared (the RCA "
        "republishes an ongoing incident every 30 s)"))
    exact_count_max_rows: int = Field(default=1_000_000, ge=0, description=(
        "PostgreSQL tables estimated at this many rows or more are counted by estimate"))


class CollectionStatusSource(Protocol):
    """What reports the collectors' status (``fabricops.collectors.collection.Collection``)."""

    def status(self) -> CollectionStatus: ...


class NewestFrameTime:
    """The newest frame time (ns) a pipeline worker accepted, fed by the worker's
    ``on_batch`` hook: ``worker.on_batch.append(clock.observe)``. Thread-safe."""

    def __init__(self) -> None:
        self._newest_ns = 0
        self._lock = threading.Lock()

    def observe(self, events: Sequence[Event], newest_ns: int) -> None:
        with self._lock:
            self._newest_ns = max(self._newest_ns, newest_ns)

    def __call__(self) -> int | None:
        """The newest frame time, None before the first frame."""
        with self._lock:
            return self._newest_ns if self._newest_ns > 0 else None


def store_engine(store: Store) -> Engine | None:
    """The started store's engine, None while it is stopped."""
    return store.engine


class PlatformMetrics:
    """See the module docstring. The collector is registered on ``registry`` (a private
    one if None) at construction; ``start`` allows store reads, ``stop`` ends them."""

    def __init__(self, config: PlatformMetricsConfig, store: Store | None = None, *,
                 collection: CollectionStatusSource | None = None,
                 newest_frame_ns: Callable[[], int | None] | None = None,
                 registry: CollectorRegistry | None = None,
                 wall_ns: Callable[[], int] = time.time_ns,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.store = store
        self.collection = collection
        self.newest_frame_ns = newest_frame_ns
        self.registry = registry if registry is not None else CollectorRegistry()
        self._wall_ns, self._monotonic = wall_ns, monotonic
        self._lock = threading.Lock()
        self._running = False
        self._cached: tuple[float, StoreStats] | None = None
        self.m_errors = Counter("fabricops_platform_metrics_errors",
                                "Store figure reads that failed", registry=self.registry)
        self.collector = PlatformCollector(self)
        self.registry.register(self.collector)

    def start(self) -> None:
        self._running = True

    def stop(self) -> None:
        with self._lock:
            self._running = False
            self._cached = None

    def store_stats(self) -> StoreStats | None:
        """The store's figures, read at most once per ``cache_s``; None if there is no
        running store or the read failed."""
        with self._lock:
            engine = store_engine(self.store) if self.store is not None else None
            if not self._running or engine is None:
                return None
            now = self._monotonic()
            if self._cached is not None and now - self._cached[0] < self.config.cache_s:
                return self._cached[1]
            try:
                stats = read_stats(engine, now_ns=self._wall_ns(),
                                   window_s=self.config.active_window_s,
                                   exact_max_rows=self.config.exact_count_max_rows)
            except StatsError as exc:
                self.m_errors.inc()
                log.warning("platform metrics: %s", exc)
                return None
            self._cached = (now, stats)
            return stats

    def lag_s(self) -> float | None:
        """Wall clock minus the newest accepted frame time, None before the first frame."""
        newest = self.newest_frame_ns() if self.newest_frame_ns is not None else None
        return None if newest is None else (self._wall_ns() - newest) / 1e9


class PlatformCollector(Collector):
    """The prometheus-client collector of a PlatformMetrics (see the module docstring)."""

    def __init__(self, source: PlatformMetrics) -> None:
        self.source = source

    def describe(self) -> Iterator[Metric]:
        yield from _collector_families(None)
        yield _lag_family(None)
        yield from _store_families(None)

    def collect(self) -> Iterator[Metric]:
        src = self.source
        if src.collection is not None:
            yield from _collector_families(src.collection.status())
        if src.newest_frame_ns is not None:
            yield _lag_family(src.lag_s())
        yield from _store_families(src.store_stats())


def _collector_families(status: CollectionStatus | None) -> list[Metric]:
    targets = GaugeMetricFamily("fabricops_collector_targets",
                                "Collector targets configured, by protocol", labels=["protocol"])
    up = GaugeMetricFamily("fabricops_collector_targets_up",
                           "Collector targets answering, by protocol", labels=["protocol"])
    frames = CounterMetricFamily("fabricops_collector_frames",
                                 "Frames published by the collectors, by protocol",
                                 labels=["protocol"])
    samples = CounterMetricFamily("fabricops_collector_samples",
                                  "Samples published by the collectors, by protocol",
                                  labels=["protocol"])
    reports = CounterMetricFamily("fabricops_collector_int_reports",
                                  "INT reports received and published")
    if status is not None:
        for protocol, (n_up, n_total) in sorted(status.targets_up.items()):
            targets.add_metric([protocol], float(n_total))
            up.add_metric([protocol], float(n_up))
        for protocol in PROTOCOLS:
            frames.add_metric([protocol], float(status.frames.get(protocol, 0)))
            samples.add_metric([protocol], float(status.samples.get(protocol, 0)))
        reports.add_metric([], float(status.int_reports))
    return [targets, up, frames, samples, reports]


def _lag_family(lag_s: float | None) -> Metric:
    lag = GaugeMetricFamily("fabricops_pipeline_lag_seconds",
                            "Wall clock minus the newest frame time the pipeline accepted")
    if lag_s is not None:
        lag.add_metric([], lag_s)
    return lag


def _store_families(stats: StoreStats | None) -> list[Metric]:
    size = GaugeMetricFamily("fabricops_store_size_bytes", "Bytes the database takes on disk")
    rows = GaugeMetricFamily("fabricops_store_rows", "Rows per table of the store",
                             labels=["table"])
    ratio = GaugeMetricFamily("fabricops_compression_ratio",
                              "Raw telemetry bytes (16 per point) over stored segment bytes")
    active = GaugeMetricFamily("fabricops_diagnoses_active",
                               "Incidents revised within the active window, by fault type",
                               labels=["fault_type"])
    actions = GaugeMetricFamily("fabricops_actions", "Remediation actions, by state",
                                labels=["state"])
    if stats is not None:
        size.add_metric([], float(stats.size_bytes))
        for name, n in sorted(stats.rows.items()):
            rows.add_metric([name], float(n))
        if stats.compression_ratio is not None:
            ratio.add_metric([], stats.compression_ratio)
        for fault, n in sorted(_by_known_fault(stats.diagnoses_active).items()):
            active.add_metric([fault], float(n))
        for state, n in stats.actions.items():
            actions.add_metric([state], float(n))
    return [size, rows, ratio, active, actions]


def _by_known_fault(counts: dict[str, int]) -> dict[str, int]:
    """The twelve fault types (zero when none), and ``other`` for the rest when any."""
    out = dict.fromkeys((f.value for f in FaultType), 0)
    for fault, n in counts.items():
        key = fault if fault in out else OTHER_FAULT
        out[key] = out.get(key, 0) + n
    return out
