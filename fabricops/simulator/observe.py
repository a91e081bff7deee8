"""What one tick did, in the model's own terms.

For tests of the physics, summaries and benchmarks. The platform never sees
this: it sees only the telemetry (frames) that the devices export.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]


@dataclass(frozen=True, eq=False)
class TickObservation:
    """Per-flow and per-channel quantities of one tick (rates in bits/s)."""

    t_s: float
    demand_bps: F64  # per flow
    offered_bps: F64  # per flow, after congestion control
    rate_bps: F64  # per flow, on the wire
    goodput_bps: F64  # per flow, new data delivered
    loss: F64  # per flow, share of packets lost
    served_bps: F64  # per channel (+ dummy)
    capacity_bps: F64  # per channel (+ dummy) after pauses and link state
    queue_bytes: F64  # per channel (+ dummy)
    pause_share: F64  # per channel (+ dummy): share of the tick its sender was paused
    job_goodput_bps: F64  # per job
    job_steps: npt.NDArray[np.int64]  # per job, completed so far

    def utilization(self, nominal_bps: F64) -> F64:
        """Served rate over nominal capacity, per channel (no dummy)."""
        n = len(nominal_bps)
        return self.served_bps[:n] / np.maximum(nominal_bps, 1.0)
