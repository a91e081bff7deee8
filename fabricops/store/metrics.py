"""Prometheus metrics of the store."""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram

WRITE_BUCKETS_S: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                          5.0, 10.0)


class StoreMetrics:
    """Rows moved per table, write latency per operation, failures per operation.

    ``op`` is the Store method name (``put_segments``, ``close_window``, ``start``...).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.rows_written = Counter("fabricops_store_rows_written",
                                    "Rows inserted or changed, by table", ["table"],
                                    registry=registry)
        self.duplicates = Counter("fabricops_store_duplicates_ignored",
                                  "Rows written again and left unchanged, by table", ["table"],
                                  registry=registry)
        self.rows_deleted = Counter("fabricops_store_rows_deleted",
                                    "Rows deleted by close_window and prune, by table",
                                    ["table"], registry=registry)
        self.write_seconds = Histogram("fabricops_store_write_seconds",
                                       "Duration of a committed write transaction, by operation",
                                       ["op"], buckets=WRITE_BUCKETS_S, registry=registry)
        self.errors = Counter("fabricops_store_errors", "Failed operations, by operation",
                              ["op"], registry=registry)

    def written(self, table: str, offered: int, changed: int) -> None:
        """Count a committed write of ``offered`` rows of which ``changed`` took effect."""
        self.rows_written.labels(table).inc(changed)
        self.duplicates.labels(table).inc(offered - changed)
