"""Path tracing on the simulated fabric: which links a probe flow's packets cross now.

The simulated counterpart of a switch's hash calculator: ``SimulatedTracer``
routes flows with the simulator's own ``Router`` (per-switch seeds, WCMP
weights, ``l3_only`` hashing, the routing view of link state) and the INT
exporter's flow addressing, so a traced path is the path the exporter reports
for the same probe flow. A flow is unroutable (None) when routing finds no
path or a link on its path is physically down (its packets are lost).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from fabricops.core.probes import LinkPath, ProbeFlow
from fabricops.simulator.agents.int_exporter import IP_BASE
from fabricops.simulator.engine import Simulator
from fabricops.simulator.routing import flow_keys

T = TypeVar("T")


class SimulatorAccess(Protocol):
    """Runs a function on the thread that owns a simulator (``SimulationDriver``,
    ``SimulatedFabric``)."""

    def call(self, fn: Callable[[Simulator], T], timeout_s: float = 10.0) -> T: ...


class SimulatedTracer:
    """A ``PathTracer`` over a simulator's current forwarding.

    With ``via``, every trace runs through ``via.call`` (between two ticks of a
    running fabric, so it never races the tick thread); without it, directly
    on ``sim`` (offline use). Inert: holds no thread of its own.
    """

    def __init__(self, sim: Simulator, via: SimulatorAccess | None = None,
                 *, timeout_s: float = 10.0) -> None:
        self.sim = sim
        self.via = via
        self.timeout_s = timeout_s
        fab = sim.fabric
        self._nic: dict[str, int] = {
            fab.port_ids[p]: i for i, p in enumerate(fab.nic_ports.tolist())}

    def trace(self, flows: Sequence[ProbeFlow]) -> list[LinkPath | None]:
        """Per flow, the link ids it crosses in order, or None if unroutable.

        ValueError names an end that is not a NIC of the fabric.
        """
        if not flows:
            return []
        src, dst, sport = self._resolve(flows)
        run = partial(trace_nic_flows, src=src, dst=dst, sport=sport)
        if self.via is None:
            return run(self.sim)
        return self.via.call(run, self.timeout_s)

    def _resolve(self, flows: Sequence[ProbeFlow]) -> tuple[NDArray[np.int32], ...]:
        ends = np.empty((len(flows), 2), np.int32)
        for i, (src, dst, _) in enumerate(flows):
            for j, port in enumerate((src, dst)):
                nic = self._nic.get(port)
                if nic is None:
                    raise ValueError(f"probe flow port {port!r} is not a NIC of the fabric")
                ends[i, j] = nic
        sport = np.fromiter((f[2] for f in flows), np.int32, len(flows))
        return ends[:, 0], ends[:, 1], sport


def trace_nic_flows(sim: Simulator, *, src: NDArray[np.int32], dst: NDArray[np.int32],
                    sport: NDArray[np.int32]) -> list[LinkPath | None]:
    """Link paths of flows given by NIC ordinals and UDP source ports, on ``sim`` now.

    Must run on the thread that owns ``sim``.
    """
    fab = sim.fabric
    src_ip, dst_ip = (x.astype(np.uint64) + np.uint64(IP_BASE) for x in (src, dst))
    port = sport.astype(np.uint64)
    paths, ok = sim.router.route(
        src, dst, flow_keys(src_ip, dst_ip, port, with_l4=True),
        flow_keys(src_ip, dst_ip, port, with_l4=False))
    real = paths != fab.dummy_channel
    link = paths // 2
    ok &= np.append(sim.oper_up, True)[link].all(axis=1)
    names = np.asarray(fab.link_ids, dtype=object)[link[real & ok[:, None]]].tolist()
    ends = np.cumsum(real[ok].sum(axis=1)).tolist()
    out: list[LinkPath | None] = [None] * len(src)
    start = 0
    for row, end in zip(np.flatnonzero(ok).tolist(), ends, strict=True):
        out[row] = tuple(names[start:end])
        start = end
    return out
