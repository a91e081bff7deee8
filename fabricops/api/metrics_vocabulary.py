"""The label vocabulary of every fabricops Prometheus metric, in one place.

An entity has one label name in every family of every process, so that series
of the same switch, port or link join in PromQL without ``label_replace``:

- ``device``: a switch or host by its topology id (``leaf-0``, ``gpu-7``),
  for collectors (SNMP, gNMI) and fabric aggregates alike;
- ``port``: a port id ``device:ifname`` (``leaf-0:eth1``, ``gpu-7:nic0``);
- ``link``: a link id, its two port ids joined by ``~`` in sorted order;
- ``protocol``: ``snmp``, ``gnmi``, ``int``;
- ``worker``: a worker (consumer loop) of a process, as in ``/ready``;
- ``group``: a consumer group on the bus; ``topic``, ``partition`` likewise;
- ``reason``: why something failed, was skipped or set aside (an error kind,
  a skipped row, a dead letter).

Other labels qualify a value, never name an entity: ``direction`` (rx|tx),
``state``, ``result``, ``outcome``, ``table``, ``op``, ``fault_type``,
``receiver``, ``counter``, ``gap``, ``path``, ``method``, ``code`` and the
like. ``ENTITY_LABELS`` lists the entity labels; ``RETIRED_LABELS`` the names
no family may use any more, with the label that replaced each.

Conventions (checked by ``promtool check metrics`` in the tests): counters end
in ``_total`` and are fed from monotonic values (rates are left to
``rate()``); units are in names (``_seconds``, ``_bytes``, ``_ratio``,
``_dbm``); every per-entity series exists from the first scrape for every
configured or known entity, within the bounds documented by each family.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

ENTITY_LABELS: Final[frozenset[str]] = frozenset(
    {"device", "port", "link", "protocol", "worker", "group", "topic", "partition", "reason"})

RETIRED_LABELS: Final[Mapping[str, str]] = MappingProxyType({
    "switch": "device",
    "target": "device",
    "host": "device",
    "node": "device",
    "nic": "port",
    "interface": "port",
    "ifname": "port",
    "cause": "reason",
    "kind": "reason",
    "error": "reason",
})

__all__ = ["ENTITY_LABELS", "RETIRED_LABELS"]
