"""Freshness: how long a node may be silent before it counts as missing.

A fixed limit fits no real fabric. A switch polled over SNMP every 30 s is
silent 29 s of every 30; a gNMI stream on a busy collector arrives seconds
behind the others, though every sample in it is on time. Either would be named
missing (and every diagnosis marked down for it) although nothing is wrong.

``Freshness`` learns both per node, in sample time only (so a replay behaves as
the live fabric did):

- **cadence**: the usual gap between the node's samples, a moving average of
  the gaps (gaps under ``burst_ns`` are one poll's notifications, not a gap; a
  gap counts at most twice the current average, so one long outage does not
  teach the node to be silent);
- **lag**: how far the node's samples trail the newest sample of the fabric
  when they arrive, a moving average and its mean deviation.

A node is missing once silent for longer than
``max(stale, cadence_factor x cadence) + lag + 4 x deviation``. A fabric whose
nodes all sample faster than ``stale / cadence_factor`` and arrive together
keeps exactly ``stale``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


class Freshness:
    """Per-node silence limits, learnt from when samples are stamped and arrive."""

    ALPHA = 0.2
    BURST_NS = 50_000_000

    def __init__(self, n_nodes: int, *, stale_ns: int, cadence_factor: float = 2.5) -> None:
        self.stale_ns = stale_ns
        self.cadence_factor = cadence_factor
        self._last = np.full(n_nodes, -1, np.int64)
        self._gap = np.zeros(n_nodes)
        self._lag = np.zeros(n_nodes)
        self._dev = np.zeros(n_nodes)

    def observe(self, node: int, ts_ns: int, front_ns: int) -> None:
        """Note a sample of ``node`` at ``ts_ns``; the fabric's newest was ``front_ns``."""
        self.observe_many(np.array([node]), np.array([ts_ns]), np.array([front_ns]))

    def observe_many(self, nodes: I64, ts_ns: I64, front_ns: I64) -> None:
        """``observe`` for each sample in order, in one array pass per round of distinct
        nodes (usually one: a node's first sample of a tick). A sample ``BURST_NS`` or
        more after the node's last is a gap; its cadence learns it, counting at most twice
        the current average. Where ``front_ns >= 0``, its lag behind the front and the
        lag's mean deviation learn it too."""
        if len(nodes) == 0:
            return
        order = np.argsort(nodes, kind="stable")
        grouped = nodes[order]
        starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
        rank = np.empty(len(nodes), np.int64)
        rank[order] = np.arange(len(nodes)) - np.repeat(starts, np.diff(np.r_[starts,
                                                                              len(nodes)]))
        rounds = int(rank.max()) + 1
        if rounds == 1:  # every node once
            self._observe_distinct(nodes, ts_ns, front_ns)
            return
        for k in range(rounds):
            at = np.flatnonzero(rank == k)
            self._observe_distinct(nodes[at], ts_ns[at], front_ns[at])

    def _observe_distinct(self, node: I64, ts: I64, front: I64) -> None:
        a = self.ALPHA
        last = self._last[node]
        avg = self._gap[node]
        gap = (ts - last).astype(np.float64)
        fresh = avg == 0.0
        gap = np.where(fresh, gap, np.minimum(gap, 2.0 * avg))
        gapping = (ts - last >= self.BURST_NS) & (last >= 0)
        self._gap[node] = np.where(gapping, np.where(fresh, gap, avg + a * (gap - avg)), avg)
        self._last[node] = np.where(ts > last, ts, last)
        seen = front >= 0
        lag = np.maximum(0, front - ts).astype(np.float64)
        old_lag, dev = self._lag[node], self._dev[node]
        err = lag - old_lag
        self._lag[node] = np.where(seen, old_lag + a * err, old_lag)
        self._dev[node] = np.where(seen, dev + a * (np.abs(err) - dev), dev)

    def limit_ns(self) -> F64:
        """Per node: the silence, in ns of sample time, after which it is missing."""
        base = np.maximum(float(self.stale_ns), self.cadence_factor * self._gap)
        out: F64 = base + self._lag + 4.0 * self._dev
        return out
