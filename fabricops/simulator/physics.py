"""Per-tick fluid physics of a lossless RoCE fabric, on arrays.

Flows follow *effective paths*: channel indices, padded with the dummy channel
(index ``n``, infinite capacity). Rates are in bits/s, queues in bytes, pause
as a share of the tick: nothing here depends on the tick's length, which only
the caller multiplies in when it turns rates into counts.

- Sharing: a multiplicative proportional fit: every flow is scaled by the
  tightest capacity/load ratio on its path, a few times; each pass yields a
  feasible allocation that moves toward max-min fairness.
- Loss and go-back-N: a flow losing a share ``p`` of its packets delivers
  ``1 / (1 + p * W)`` of its wire rate as goodput, ``W`` being the packets
  resent per loss.
- ECN: a RED profile (Kmin, Kmax, Pmax) on the egress queue, whose depth
  follows the offered/served ratio of the channel.
- PFC: a switch pauses an ingress channel for the share of its capacity that
  carries traffic into egress channels it cannot drain; pause spreads one hop
  upstream per tick.
- DCQCN: a tick (0.1 s to a few seconds) is far longer than DCQCN's
  microsecond control loop, so each tick is its converged state: a sender whose receiver
  returns CNPs runs at its fair share, cut further when its packets are marked
  beyond the equilibrium rate; a sender that gets no CNPs back (its packets
  are stuck behind a pause, or ECN is off where it is congested) keeps
  pushing, and that excess is what fills buffers and triggers PFC. A flow that
  starts overruns for ``onset_s`` before its sender reacts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

Paths = npt.NDArray[np.intp]
"""Channels of each flow's path, ``(flows, hops)``: hop-major (Fortran order) and of
the platform's index type, so per-path reductions and gathers work on contiguous
columns and numpy does not convert the indices on every use."""
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]
BIG = 1e6


class PhysicsConfig(BaseModel):
    """Constants of the fabric model; defaults fit a 400G RoCEv2 fabric."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fit_iterations: int = Field(default=4, ge=1, le=32)
    packet_bytes: int = Field(default=4158, gt=0, description="4096 B payload + RoCEv2 headers")
    gbn_resend_pkts: float = Field(
        default=1000.0, ge=0, description="Packets resent per loss under go-back-N"
    )
    ecn_kmin_bytes: float = Field(default=100_000.0, ge=0)
    ecn_kmax_bytes: float = Field(default=1_000_000.0, gt=0)
    ecn_pmax: float = Field(default=0.2, gt=0, le=1)
    xoff_bytes: float = Field(default=2_000_000.0, gt=0, description="PFC pause threshold")
    pfc_backlog_share: float = Field(
        default=0.2, gt=0, lt=1, description="Unserved share of offered load that reaches Xoff"
    )
    pause_quanta_s: float = Field(default=65535 * 512 / 400e9, gt=0)
    cnp_interval_s: float = Field(default=50e-6, gt=0, description="CNP rate limit per flow")
    equilibrium_depth: float = Field(
        default=0.05, gt=0, lt=1,
        description="Where in [Kmin, Kmax] a bottleneck queue settles under DCQCN",
    )
    onset_s: float = Field(
        default=0.002, ge=0, description="How long a starting flow overruns before DCQCN reacts"
    )
    retry_rate_bps: float = Field(
        default=1e9, ge=0, description="Rate a sender keeps resending into a black hole"
    )
    pfc_response_ns: float = Field(
        default=2400.0, ge=0, description="PFC response time a port's headroom must cover"
    )


def sum_at(index: npt.NDArray[np.integer[Any]], weights: F64, n_slots: int) -> F64:
    """Sum ``weights`` into ``n_slots`` bins by ``index`` (a weighted bincount)."""
    return np.bincount(index, weights=weights, minlength=n_slots).astype(np.float64, copy=False)


def over_path(op: np.ufunc, per_channel: npt.NDArray[Any], epath: Paths) -> npt.NDArray[Any]:
    """Per flow, ``op`` (``np.minimum``, ``np.add``, ``np.logical_or``) of ``per_channel``
    over the channels of its path, hop by hop, without the ``(flows, hops)`` temporary:
    the values of ``op.reduce(per_channel[epath], axis=1)`` bit for bit, except that a
    sum of only -0.0 stays -0.0 (numpy's sum starts from +0.0)."""
    out = per_channel.take(epath[:, 0])
    for hop in range(1, epath.shape[1]):
        op(out, per_channel.take(epath[:, hop]), out=out)
    return out


def channel_sum(epath: Paths, per_flow: F64, n_slots: int) -> F64:
    """Sum a per-flow quantity over every channel each flow crosses."""
    hops = epath.shape[1]
    if epath.flags.f_contiguous:  # hop-major: no copy of the paths
        return sum_at(epath.ravel(order="F"), np.tile(per_flow, hops), n_slots)
    return sum_at(epath.ravel(), np.repeat(per_flow, hops), n_slots)


def fair_rates(epath: Paths, offered: F64, capacity: F64, iterations: int,
               offered_load: F64 | None = None) -> tuple[F64, F64 | None]:
    """Rates no larger than ``offered`` that fit ``capacity`` on every channel, and their
    per-channel load where the rounds ended at a fixed point (the last round summed
    it), else None. ``offered_load``: ``channel_sum`` of ``offered``, if the caller has
    it (the first round's sum)."""
    rate = offered.copy()
    load = offered_load
    for _ in range(iterations):
        if load is None:
            load = channel_sum(epath, rate, len(capacity))
        scale = np.maximum(load, 1e-9)  # capacity over load, in place: BIG where none
        np.divide(capacity, scale, out=scale)
        np.copyto(scale, BIG, where=~(load > 0))
        fitted = np.minimum(offered, rate * np.minimum(over_path(np.minimum, scale, epath), BIG))
        if np.array_equal(fitted, rate):  # a fixed point: every further round gives it again
            return rate, load
        rate, load = fitted, None
    return rate, None


def path_product_complement(epath: Paths, prob: F64) -> F64:
    """Probability that a flow meets at least one event of per-channel probability ``prob``."""
    if len(epath) > 1 and not prob.any() and not np.signbit(prob).any():
        # every channel +0.0 (a healthy fabric): every flow gets what its first gets
        return np.full(len(epath), path_product_complement(epath[:1], prob)[0])
    keep = np.log1p(-np.clip(prob, 0.0, 1.0 - 1e-12))
    total = over_path(np.add, keep, epath)
    total += 0.0  # a path of only -0.0 (log1p(-0.0)) sums to +0.0, as numpy's sum does
    out: F64 = -np.expm1(total)
    return out


def goodput_share(loss: F64, cfg: PhysicsConfig) -> F64:
    """Share of the wire rate that is new data under go-back-N at loss rate ``loss``."""
    return 1.0 / (1.0 + loss * cfg.gbn_resend_pkts)


def queue_depth(offered: F64, served: F64, capacity: F64, cfg: PhysicsConfig,
                kmin: F64 | float | None = None, kmax: F64 | float | None = None) -> F64:
    """Egress queue depth (bytes) of each channel for one tick.

    ``kmin``/``kmax`` (per channel) are the ECN thresholds queues settle between;
    by default the physics' own. The settled and rising depths are worked out only
    where they apply (busy and backlogged channels, few of them).
    """
    lo = cfg.ecn_kmin_bytes if kmin is None else kmin
    hi = cfg.ecn_kmax_bytes if kmax is None else kmax
    util = np.clip(served / np.maximum(capacity, 1.0), 0.0, 0.999)
    queue: F64 = np.minimum(cfg.packet_bytes * util**2 / (1.0 - util), np.multiply(lo, 0.5))
    busy = np.flatnonzero(util >= 0.98)
    if len(busy):
        lo_b = _at(lo, busy)
        queue[busy] = lo_b + np.subtract(_at(hi, busy), lo_b) * cfg.equilibrium_depth
    over = np.flatnonzero(offered > capacity * 1.0001)
    if len(over):
        off, lo_o = offered[over], _at(lo, over)
        backlog = 1.0 - np.minimum(capacity[over], off) / np.maximum(off, 1e-9)
        queue[over] = lo_o + np.subtract(cfg.xoff_bytes, lo_o) * np.minimum(
            1.0, backlog / cfg.pfc_backlog_share)
    return queue


def mark_probability(queue: F64, kmin: F64, kmax: F64, cfg: PhysicsConfig,
                     pmax: F64 | float | None = None) -> F64:
    """RED/ECN marking probability for a queue depth and per-channel thresholds: 0 below
    ``kmin`` (and where a depth or threshold is no number), 1 from ``kmax``, a ramp to
    ``pmax`` between; worked out only where a queue reaches ``kmin``."""
    top = cfg.ecn_pmax if pmax is None else pmax
    out = np.zeros(len(queue))
    at = np.flatnonzero(queue >= kmin)
    if len(at):
        q, lo, hi = queue[at], _at(kmin, at), _at(kmax, at)
        with np.errstate(invalid="ignore"):
            ramp = _at(top, at) * (q - lo) / np.maximum(hi - lo, 1.0)
        out[at] = np.nan_to_num(np.where(q >= hi, 1.0, ramp), nan=0.0)
    return out


def _at(value: F64 | float, index: npt.NDArray[np.intp]) -> F64 | float:
    """A per-channel array's values at ``index``; a scalar as it is."""
    return value[index] if isinstance(value, np.ndarray) else value


def pause_pressure(
    epath: Paths, excess: F64, backlogged: B, n_slots: int, pfc_capable: B, nominal: F64
) -> F64:
    """Share of each channel's time its receiver must pause it next tick.

    A flow's ``excess`` (bits/s it pushes beyond what it is carried) waits in
    front of every backlogged channel on its path; the switch that holds it
    pauses the channel the flow arrived on for as long as that excess takes to
    cross it. Excess held at the sender itself (first hop) needs no pause.
    """
    pushing = np.flatnonzero(excess > 0)
    if not len(pushing):  # nothing waits anywhere: no pause
        return np.zeros(n_slots)
    paths = epath[pushing]
    # summed flow by flow, hop by hop; a hop with nothing ahead adds 0.0 (no change)
    weights = np.where(backlogged[paths[:, 1:]], excess[pushing, None], 0.0)
    need = sum_at(paths[:, :-1].ravel(), weights.ravel(), n_slots)
    share = need / np.maximum(nominal, 1.0)
    return np.where(pfc_capable, np.clip(share, 0.0, 1.0), 0.0)


def dcqcn_share(marked: F64, cfg: PhysicsConfig) -> F64:
    """Share of its fair rate a DCQCN sender keeps when its packets are marked at ``marked``.

    At a healthy bottleneck marking settles near ``ecn_pmax * equilibrium_depth``
    and costs nothing; beyond that the rate falls as 1/sqrt(marking).
    """
    eq = cfg.ecn_pmax * cfg.equilibrium_depth
    return np.where(marked > eq, np.sqrt(eq / np.maximum(marked, eq)), 1.0)
