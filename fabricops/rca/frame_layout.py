"""Where a frame's samples go in the fabric view, worked out once per layout.

A device sends the same entities and metrics frame after frame (a decoder
shares the columns between them, see ``EntityTables``), so what folding a
frame needs besides its values is fixed: the fabric ports it covers, and for
each sample kept its cell (a counter: the row of its port among those ports
and its counter column) or its level column. ``FrameLayout.of`` works that
out from the frame's sample ports (-1: not a port of the fabric) and metric
ids; samples of a metric the view does not keep, or of no fabric port, are
left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class FrameLayout:
    """One layout's placement of samples (indices as int32, to keep many layouts)."""

    n_samples: int
    ports: I64  # the distinct fabric ports the frame covers, ascending
    owners: tuple[int, ...]  # the nodes of all its fabric ports
    counter_take: I32  # samples that are counters
    counter_cell: I32  # their cell: row (index into ports) x n_counters + column
    counter_repeats: bool  # a cell taken twice (PFC priorities: summed)
    level_take: I32  # samples that are levels
    level_row: I32
    level_col: I32  # column among the levels
    level_state: npt.NDArray[np.bool_]  # an integer state, not a float gauge

    @classmethod
    def of(cls, sample_ports: I64, metric: npt.NDArray[np.uint16],
           column_of: npt.NDArray[np.int16], n_counters: int, state_col: int,
           port_node: I64) -> FrameLayout:
        """``column_of``: per metric id its view column (-1: not kept); columns below
        ``n_counters`` are counters, ``state_col`` the integer level."""
        top = len(column_of) - 1
        mid = metric.astype(np.int64)
        col = np.where(mid <= top, column_of[np.minimum(mid, top)], -1).astype(np.int64)
        known = sample_ports >= 0
        take = np.flatnonzero(known & (col >= 0))
        ports, row = np.unique(sample_ports[take], return_inverse=True)
        c = col[take]
        counter = c < n_counters
        cell = row[counter] * n_counters + c[counter]
        level_col = c[~counter] - n_counters
        owners = tuple(np.unique(port_node[sample_ports[known]]).tolist())
        return cls(len(sample_ports), ports.astype(np.int64), owners,
                   take[counter].astype(np.int32), cell.astype(np.int32),
                   len(np.unique(cell)) < len(cell), take[~counter].astype(np.int32),
                   row[~counter].astype(np.int32), level_col.astype(np.int32),
                   level_col == state_col - n_counters)
