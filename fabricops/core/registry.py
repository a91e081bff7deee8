"""Metrics that several components of one process share on one registry.

Components of the same kind (one consumer loop per group, say) report into
one metric family with a label per instance; the first to need the family
makes it, the others find it.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


def shared_counter(registry: CollectorRegistry, name: str, doc: str,
                   labels: list[str]) -> Counter:
    """The counter ``name`` of ``registry``, made on first use."""
    existing = registry._names_to_collectors.get(name)
    if isinstance(existing, Counter):
        return existing
    return Counter(name, doc, labels, registry=registry)
