"""Metrics that several components of one process share on one registry.

Components of the same kind (one consumer loop per group, say) report into
one metric family with a label per instance; the first to need the family
makes it, the others find it.
"""

from __future__ import annotations

from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

Metric = TypeVar("Metric", Counter, Gauge)


def shared_counter(registry: CollectorRegistry, name: str, doc: str,
                   labels: list[str]) -> Counter:
    """The counter ``name`` of ``registry``, made on first use."""
    return _shared(Counter, registry, name, doc, labels)


def shared_gauge(registry: CollectorRegistry, name: str, doc: str,
                 labels: list[str]) -> Gauge:
    """The gauge ``name`` of ``registry``, made on first use."""
    return _shared(Gauge, registry, name, doc, labels)


def _shared(kind: type[Metric], registry: CollectorRegistry, name: str, doc: str,
            labels: list[str]) -> Metric:
    """The metric ``name`` of ``registry`` if it is a ``kind``, else a new one there."""
    existing = registry._names_to_collectors.get(name)
    if isinstance(existing, kind):
        return existing
    return kind(name, doc, labels, registry=registry)
