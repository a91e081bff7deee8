"""Fabric aggregates: per-port rates and levels folded into per-link and per-switch figures.

The input is a :class:`~fabricops.rca.view.Snapshot` of the RCA's
:class:`~fabricops.rca.view.FabricView` (rates per second from consecutive
counter samples, NaN where unknown: never reported, stale, reset). Everything
here is pure and works on arrays: one pass per figure over all links or ports.

Per link (ends ``a`` and ``b``, sorted as in the link id):

- utilization: the larger of the two directions' transmit rate over the
  link's capacity (the slower end's speed), clipped to [0, 1]. A direction is
  read at its sender (``out_octets``) or, where the sender does not report
  (a host without telemetry), at its receiver (``in_octets``);
- errors per second: ``in_errors + in_fcs_errors`` of both ends;
- rx power: the lower of the two ends' optical receive power;
- state: down if any reporting end is not oper-up (IF-MIB 1), up if every
  reporting end is, unknown if neither reports.

Per switch, summed over its ports: PFC pause frames received and sent, ECN
marks, ``in_discards + out_discards``. A figure is NaN when none of its
inputs is known, so a silent link or switch is unknown, never zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fabricops.rca.view import PortIndex, Snapshot

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
I8 = npt.NDArray[np.int8]

LINK_UP, LINK_DOWN, LINK_UNKNOWN = 1, 0, -1
OPER_UP = 1.0


@dataclass(frozen=True)
class FabricAggregates:
    """One snapshot's figures, per link (``PortIndex.link_ids`` order) and per switch
    (``PortIndex.switch_nodes`` order); NaN where unknown."""

    ts_ns: int
    link_utilization: F64
    link_errors_per_s: F64
    link_rx_power_dbm: F64
    link_state: I8  # LINK_UP, LINK_DOWN or LINK_UNKNOWN
    switch_pfc_rx_per_s: F64
    switch_pfc_tx_per_s: F64
    switch_ecn_per_s: F64
    switch_discards_per_s: F64

    @property
    def links_up(self) -> int:
        return int(np.count_nonzero(self.link_state == LINK_UP))

    @property
    def links_down(self) -> int:
        return int(np.count_nonzero(self.link_state == LINK_DOWN))

    def link_reported(self) -> npt.NDArray[np.bool_]:
        """Links with at least one known figure."""
        known = ~np.isnan(np.stack([self.link_utilization, self.link_errors_per_s,
                                    self.link_rx_power_dbm]))
        out: npt.NDArray[np.bool_] = np.any(known, axis=0)
        return out

    def switch_reported(self) -> npt.NDArray[np.bool_]:
        """Switches with at least one known figure."""
        known = ~np.isnan(np.stack([self.switch_pfc_rx_per_s, self.switch_pfc_tx_per_s,
                                    self.switch_ecn_per_s, self.switch_discards_per_s]))
        out: npt.NDArray[np.bool_] = np.any(known, axis=0)
        return out


def nan_sum(*columns: F64) -> F64:
    """Element-wise sum ignoring NaN; NaN where every column is NaN."""
    stack = np.stack(columns)
    known = ~np.isnan(stack)
    total: F64 = np.where(known.any(axis=0), np.nansum(stack, axis=0), np.nan)
    return total


def aggregate(index: PortIndex, snap: Snapshot) -> FabricAggregates:
    """Per-link and per-switch figures of ``snap`` (see the module docstring)."""
    a, b = index.link_ports[:, 0], index.link_ports[:, 1]
    out_bps, in_bps = snap.col("out_octets") * 8.0, snap.col("in_octets") * 8.0
    a_to_b = np.where(np.isnan(out_bps[a]), in_bps[b], out_bps[a])
    b_to_a = np.where(np.isnan(out_bps[b]), in_bps[a], out_bps[b])
    capacity = np.minimum(index.speed_bps[a], index.speed_bps[b])
    util = np.clip(np.fmax(a_to_b, b_to_a) / capacity, 0.0, 1.0)
    errors, fcs = snap.col("in_errors"), snap.col("in_fcs_errors")
    link_errors = nan_sum(errors[a], fcs[a], errors[b], fcs[b])
    rx = snap.col("rx_power_dbm")
    sw = index.switch_nodes
    discards = nan_sum(snap.col("in_discards"), snap.col("out_discards"))
    return FabricAggregates(
        ts_ns=snap.ts_ns,
        link_utilization=util,
        link_errors_per_s=link_errors,
        link_rx_power_dbm=np.fmin(rx[a], rx[b]),
        link_state=link_states(snap.col("oper_status"), a, b),
        switch_pfc_rx_per_s=per_node(index, snap.col("pfc_rx_pause"))[sw],
        switch_pfc_tx_per_s=per_node(index, snap.col("pfc_tx_pause"))[sw],
        switch_ecn_per_s=per_node(index, snap.col("ecn_marked_pkts"))[sw],
        switch_discards_per_s=per_node(index, discards)[sw],
    )


def link_states(oper: F64, a: I64, b: I64) -> I8:
    """Per link: LINK_DOWN if a reporting end is not up, LINK_UP if every reporting end
    is up, LINK_UNKNOWN if no end reports."""
    ends = np.stack([oper[a], oper[b]])
    known = ~np.isnan(ends)
    down = (known & (ends != OPER_UP)).any(axis=0)
    state = np.where(down, LINK_DOWN, np.where(known.any(axis=0), LINK_UP, LINK_UNKNOWN))
    out: I8 = state.astype(np.int8)
    return out


def per_node(index: PortIndex, port_values: F64) -> F64:
    """Sum of ``port_values`` over each node's ports, ignoring NaN; NaN for a node
    none of whose ports has a value."""
    known = ~np.isnan(port_values)
    n = index.n_nodes
    total = np.bincount(index.port_node, weights=np.where(known, port_values, 0.0),
                        minlength=n)
    count = np.bincount(index.port_node, weights=known.astype(np.float64), minlength=n)
    out: F64 = np.where(count > 0, total, np.nan)
    return out
