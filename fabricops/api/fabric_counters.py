"""PortCounterTotals: monotonic per-port totals of device counters, for export as counters.

Fed the same frames as the fabric view, it keeps, for each port and each of
``TOTALLED`` (error, discard, PFC pause and ECN counters), the device's own
cumulative value plus an offset: when a device counter goes back (the device
or its line card restarted) the value it had reached is added to the offset,
so the exported total never decreases and ``rate()`` in Prometheus sees the
increase since the restart, not a drop. A counter sample older than the one
already held is ignored (frames of one device arrive in time order; anything
else is a replay). A device collected over several protocols is read from one
source at a time, as the fabric view does: the first that reports, until it
is silent for ``stale_s``; on failover the new source's first sample is a
new baseline (the total continues from where it was, without a jump).

Totals are float64 counts: exact up to 2**53 events per port and counter.
Samples of unknown devices or ports are counted in ``samples_unknown``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import numpy as np
import numpy.typing as npt

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.rca.view import PortIndex

F64 = npt.NDArray[np.float64]

TOTALLED: Final = ("in_errors", "in_fcs_errors", "in_discards", "out_discards",
                   "pfc_rx_pause", "pfc_tx_pause", "ecn_marked_pkts")
TOTAL_COL: Final = {name: i for i, name in enumerate(TOTALLED)}


def _column_of_metric() -> npt.NDArray[np.int16]:
    top = max(m.id for m in CATALOGUE.metrics) + 1
    out = np.full(top, -1, np.int16)
    for m in CATALOGUE.metrics:
        if m.family.name in TOTAL_COL:
            out[m.id] = TOTAL_COL[m.family.name]
    return out


class PortCounterTotals:
    """Per port x ``TOTALLED``: a monotonic total (see the module docstring)."""

    def __init__(self, index: PortIndex, *, stale_s: float = 15.0) -> None:
        self.index = index
        self.stale_ns = int(stale_s * 1e9)
        n = index.n_ports
        self._col_of = _column_of_metric()
        self._raw = np.zeros((n, len(TOTALLED)), np.uint64)
        self._ts = np.full((n, len(TOTALLED)), -1, np.int64)
        self._offset = np.zeros((n, len(TOTALLED)), np.float64)
        self._rebased = np.zeros((n, len(TOTALLED)), bool)
        self._source: dict[int, str] = {}
        self._node_ts: dict[int, int] = {}
        self._entity_cache: dict[tuple[str, ...], npt.NDArray[np.int64]] = {}
        self.samples_unknown = 0
        self.resets = 0

    def ingest(self, frames: Iterable[Frame]) -> None:
        for frame in frames:
            self._one(frame)

    def totals(self, name: str) -> F64:
        """Per port: the monotonic total of counter ``name`` (0 where never reported)."""
        col = TOTAL_COL[name]
        reported = self._ts[:, col] >= 0
        raw = self._raw[:, col].astype(np.float64)
        out: F64 = np.where(reported, raw + self._offset[:, col], self._offset[:, col])
        return out

    def _ports_of(self, entities: tuple[str, ...]) -> npt.NDArray[np.int64]:
        got = self._entity_cache.get(entities)
        if got is None:
            got = np.array([self.index.port_of.get(e, -1) for e in entities], np.int64)
            self._entity_cache[entities] = got
        return got

    def _one(self, frame: Frame) -> None:
        node = self.index.node_of.get(frame.device)
        if node is None:
            self.samples_unknown += len(frame.raw)
            return
        ts = frame.ts_ns
        pinned, last = self._source.get(node), self._node_ts.get(node, -1)
        if pinned is not None and pinned != frame.source:
            if ts - last <= self.stale_ns:
                return
            self._rebase(node)
        self._source[node] = frame.source
        self._node_ts[node] = max(last, ts)
        port = self._ports_of(frame.entities)[frame.entity_idx]
        mid = frame.metric.astype(np.int64)
        top = len(self._col_of) - 1
        col = np.where(mid <= top, self._col_of[np.minimum(mid, top)], -1).astype(np.int64)
        self.samples_unknown += int(np.count_nonzero(port < 0))
        ok = (port >= 0) & (col >= 0)
        if not ok.any():
            return
        port, col = port[ok], col[ok]
        # PFC counters of every priority are summed into one value per port
        cells, inverse = np.unique(port * len(TOTALLED) + col, return_inverse=True)
        cur = np.zeros(len(cells), np.uint64)
        np.add.at(cur, inverse, frame.raw[ok])
        p, c = cells // len(TOTALLED), cells % len(TOTALLED)
        prev_ts, prev = self._ts[p, c], self._raw[p, c]
        newer = prev_ts < ts
        went_back = newer & (prev_ts >= 0) & (cur < prev)
        self.resets += int(np.count_nonzero(went_back))
        self._offset[p, c] += np.where(went_back, prev.astype(np.float64), 0.0)
        baseline = newer & self._rebased[p, c]
        self._offset[p, c] -= np.where(baseline, cur.astype(np.float64), 0.0)
        self._rebased[p, c] &= ~baseline
        self._raw[p, c] = np.where(newer, cur, prev)
        self._ts[p, c] = np.where(newer, ts, prev_ts)

    def _rebase(self, node: int) -> None:
        """Fold the node's totals into its offsets, so a new source's first sample
        continues them."""
        ports = np.flatnonzero(self.index.port_node == node)
        held = self._ts[ports] >= 0
        self._offset[ports] += np.where(held, self._raw[ports].astype(np.float64), 0.0)
        self._raw[ports] = 0
        self._ts[ports] = -1
        self._rebased[ports] = True
