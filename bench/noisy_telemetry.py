"""Realistically noisy fabric telemetry, deterministic by seed, for the compression bench.

The simulator's counters are smooth (a fluid model with a fixed tick); real
switches are not. This generator draws what a 1 s poll of RoCE leaf switches
looks like, one ``SeriesBlock`` per device and window, with the catalogue's
metric ids so that ``gauge_bounds`` gives each gauge its documented bound.

Model, per device (a leaf switch) and port, over ``n_points`` polls:

* Poll times: every ``interval_s`` with a per-poll jitter of a few ms (normal,
  sigma 4 ms) plus rare late polls (0.5 %, up to 0.4 s); all ports of a device
  share its poll times. Rarely (0.05 %) a port misses a poll (absent point).
* Port activity: 15 % of ports are idle (no job: counters only move with the
  odd LLDP/control frame, gauges sit at their idle level). Busy ports carry a
  training job's collectives as on/off phases: an iteration period of 6-30 s
  per job, a communication share of 20-60 %, phase jitter, so the per-second
  utilisation is the share of the second spent communicating times a line
  efficiency of 0.85-0.97, times multiplicative noise (sigma 0.2-2 %,
  log-uniform per port: congestion control and poll-to-counter skew). On top,
  heavy-tailed bursts (Pareto, alpha 1.5: checkpoint writes, storage reads)
  arrive as a Poisson process on 40 % of ports; utilisation is clipped to
  [0, 1] of a 400 Gb/s port.
* Counters, from the utilisation and the true poll interval:
  ``in/out_octets`` (in and out differ: different efficiency and noise),
  ``in/out_pkts`` (octets over a packet size that mixes 4 KiB RoCE frames with
  small ACK/CNP frames: a per-port share of 2-10 % of frames, sigma 0.2 %
  from poll to poll), ``ecn_marked_pkts`` and
  ``pfc_rx/tx_pause{prio=3}`` (Poisson, proportional to how far the port is
  over 90 % and to a per-port congestion factor, so mostly 0), ``in_errors``
  and ``in_fcs_errors`` (0 except on 3 % of ports with a gray-loss rate of
  1e-9..1e-6 per packet), ``in/out_discards`` (rare Poisson clusters),
  ``carrier_transitions`` (+2 per link flap). Initial values reflect uptime
  (up to 2**48). 10 % of ports have 32-bit counters for packets and errors
  (wrapping at 2**32), 2 % start within 2**40 of 2**64 (wrapping there), and
  every other device reboots once, at a random poll: every counter of it
  restarts from 0.
* Gauges, at the resolution the device reports: ``rx/tx_power_dbm`` at 0.01 dBm
  (a per-port level -6..+2 dBm, slow random-walk drift, sensor noise sigma
  0.01-0.03 dBm), ``temperature_c`` at 1/256 C (a per-port base, a first-order
  lag towards the heat of the traffic, noise sigma 0.05 C),
  ``queue_depth_bytes`` and ``queue_watermark_bytes`` in 208-byte cells (0
  unless the port is congested; then log-normal, the watermark at or above the
  depth), ``egress_tx_util`` the utilisation at 0.1 % resolution.
* States: ``oper_status`` up (1); a link flap takes it down (2) for 1-5 polls
  on 1 % of ports.

``noisy_blocks(seed, ...)`` yields ``(device, SeriesBlock)`` per window; given a
``Draws``, it also records the scale of the independent noise behind each value
(``noise_floor`` turns that into the fewest bytes any codec needs);
``DEFAULT_SHAPE`` (2 leaves x 52 ports x 19 metrics = 1,976 series x 3,600
points, 7.1 M samples) draws in about a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from numpy.typing import NDArray

from fabricops.core.catalogue import CATALOGUE
from fabricops.pipeline.keyframe import SeriesBlock

T0_NS: Final = 1_767_225_600_000_000_000
LINE_BYTES_S: Final = 400e9 / 8
CELL_BYTES: Final = 208
COUNTERS: Final = ("in_octets", "out_octets", "in_pkts", "out_pkts", "in_errors",
                   "in_fcs_errors", "in_discards", "out_discards", "carrier_transitions",
                   "ecn_marked_pkts", "pfc_rx_pause{prio=3}", "pfc_tx_pause{prio=3}")
GAUGES: Final = ("queue_depth_bytes", "queue_watermark_bytes", "rx_power_dbm",
                 "tx_power_dbm", "temperature_c", "egress_tx_util")
STATES: Final = ("oper_status",)
METRICS: Final = COUNTERS + GAUGES + STATES
WRAP32: Final = ("in_pkts", "out_pkts", "in_errors", "in_fcs_errors", "in_discards",
                 "out_discards")


@dataclass(frozen=True)
class Shape:
    """How much to draw: devices, ports per device, polls and the poll interval."""

    devices: int = 2
    ports: int = 52
    points: int = 3600
    interval_s: float = 1.0


DEFAULT_SHAPE: Final = Shape()
F = NDArray[np.float64]


@dataclass
class Draws:
    """Per device, the scale of the independent noise the generator drew for each value
    (arrays of ``(ports, points)``, 0 where that value carries none):

    * ``in/out_octets``: sigma, in bytes, of the normal noise on each increment;
    * ``in/out_pkts``: sigma, in packets, of the increment given its octets (the
      frame-size mix);
    * ``ecn_marked_pkts`` and the PFC pause counters: the Poisson rate of each
      increment;
    * ``rx/tx_power_dbm``, ``temperature_c``: sigma of the sensor noise, in the
      gauge's unit;
    * ``present``: which points are stored, ``(ports, metrics, points)`` in
      ``METRICS`` order.
    """

    devices: list[dict[str, NDArray[np.float64] | NDArray[np.bool_]]] = field(
        default_factory=list)


def _poll_times(rng: np.random.Generator, shape: Shape) -> NDArray[np.int64]:
    n = shape.points
    jitter = rng.normal(0.0, 0.004, n)
    late = rng.random(n) < 0.005
    jitter[late] += rng.uniform(0.05, 0.4, int(late.sum()))
    t = np.arange(n) * shape.interval_s + jitter
    t = np.maximum.accumulate(t)
    ns = np.round(t * 1e9).astype(np.int64) + T0_NS
    ns[1:] = np.maximum(ns[1:], ns[:-1] + 1_000_000)
    ns = np.maximum.accumulate(ns)
    return ns


def _utilisation(rng: np.random.Generator, p: int, t_s: F, idle: NDArray[np.bool_]
                 ) -> tuple[F, F]:
    """Per port and poll, the share of line rate used over the poll interval, and the
    sigma of the normal noise in it (0 where the share was clipped)."""
    n = len(t_s)
    period = rng.uniform(6.0, 30.0)
    share = rng.uniform(0.2, 0.6, (p, 1))
    phase = rng.uniform(0, period, (p, 1)) + rng.normal(0, 0.3, (p, n)).cumsum(axis=1) * 0.02
    pos = ((t_s[None, :] + phase) % period) / period
    on = np.clip((share - pos) * period, 0.0, 1.0)
    eff = rng.uniform(0.85, 0.97, (p, 1))
    sd = 10 ** rng.uniform(-2.7, -1.7, (p, 1))
    noise = rng.normal(1.0, sd, (p, n))
    u = on * eff * noise + rng.uniform(0.0, 0.02, (p, 1))
    bursty = rng.random(p) < 0.4
    arrivals = (rng.random((p, n)) < 0.01) & bursty[:, None]
    size = (rng.pareto(1.5, (p, n)) + 1) * 0.05
    length = rng.integers(1, 20, (p, n))
    burst = np.zeros((p, n))
    for i, j in zip(*np.nonzero(arrivals), strict=True):
        burst[i, j:j + length[i, j]] += size[i, j]
    u += burst
    sigma = np.where((u > 0.0) & (u < 1.0), on * eff * sd, 0.0)
    u = np.clip(u, 0.0, 1.0)
    u[idle] = 0.0
    sigma[idle] = 0.0
    return u, sigma


def _counter(start: NDArray[np.uint64], steps: NDArray[np.int64], width: NDArray[np.int64]
             ) -> NDArray[np.uint64]:
    total = start[:, None] + np.cumsum(steps, axis=1).astype(np.uint64)
    mask = np.where(width == 32, np.uint64(2**32 - 1), np.uint64(2**64 - 1))
    return total & mask[:, None]


def _device(rng: np.random.Generator, shape: Shape, reboots: bool,
            noise: dict[str, F] | None = None
            ) -> tuple[NDArray[np.int64], dict[str, NDArray[np.uint64]]]:
    p, n = shape.ports, shape.points
    noise = {} if noise is None else noise
    ts = _poll_times(rng, shape)
    dt = np.diff(ts, prepend=ts[0] - round(shape.interval_s * 1e9)) / 1e9
    t_s = (ts - T0_NS) / 1e9
    idle = rng.random(p) < 0.15
    (u_in, sd_in), (u_out, sd_out) = (_utilisation(rng, p, t_s, idle) for _ in range(2))
    octets = {k: np.round(u * LINE_BYTES_S * dt[None, :]).astype(np.int64)
              for k, u in (("in", u_in), ("out", u_out))}
    for side, sd in (("in", sd_in), ("out", sd_out)):
        noise[f"{side}_octets"] = sd * LINE_BYTES_S * dt[None, :]
    for v in octets.values():
        v += rng.poisson(0.05, (p, n)) * 128
    steps: dict[str, NDArray[np.int64]] = {}
    for side in ("in", "out"):
        small_share = np.clip(rng.uniform(0.02, 0.1, (p, 1)) + rng.normal(0, 0.002, (p, n)),
                              0.0, 0.5)
        size = (1 - small_share) * 4158.0 + small_share * 84.0
        unclipped = (small_share > 0.0) & (small_share < 0.5)
        noise[f"{side}_pkts"] = np.where(unclipped, octets[side] * 4074.0 * 0.002 / size**2, 0.0)
        steps[f"{side}_octets"] = octets[side]
        steps[f"{side}_pkts"] = np.round(octets[side] / size).astype(np.int64)
    over = np.clip(u_out - 0.9, 0.0, None) * rng.uniform(0, 2e5, (p, 1))
    noise["ecn_marked_pkts"], noise["pfc_rx_pause{prio=3}"] = over, over * 0.3
    steps["ecn_marked_pkts"] = rng.poisson(over)
    steps["pfc_rx_pause{prio=3}"] = rng.poisson(over * 0.3)
    noise["pfc_tx_pause{prio=3}"] = np.clip(u_in - 0.92, 0, None) * rng.uniform(0, 1e5, (p, 1))
    steps["pfc_tx_pause{prio=3}"] = rng.poisson(noise["pfc_tx_pause{prio=3}"])
    gray = (rng.random(p) < 0.03)[:, None] * 10 ** rng.uniform(-9, -6, (p, 1))
    steps["in_fcs_errors"] = rng.poisson(steps["in_pkts"] * gray)
    steps["in_errors"] = steps["in_fcs_errors"] + rng.poisson(1e-5, (p, n))
    for k in ("in_discards", "out_discards"):
        steps[k] = rng.poisson(1e-3, (p, n)) * rng.integers(1, 5000, (p, n))
    flap_at = np.where(rng.random(p) < 0.01, rng.integers(0, n, p), -1)
    flap_len = rng.integers(1, 6, p)
    status = np.ones((p, n), np.uint64)
    steps["carrier_transitions"] = np.zeros((p, n), np.int64)
    for i in np.flatnonzero(flap_at >= 0).tolist():
        a = int(flap_at[i])
        status[i, a:a + int(flap_len[i])] = 2
        steps["carrier_transitions"][i, a] = 2
    series: dict[str, NDArray[np.uint64]] = {}
    width32 = rng.random(p) < 0.10
    near_top = rng.random(p) < 0.02
    reboot = int(rng.integers(n // 4, n)) if reboots else -1
    for name in COUNTERS:
        s = steps[name]
        s[:, 0] = 0
        if name in noise:
            noise[name][:, 0] = 0.0  # the keyframe: its value is the start, not noise
        start = rng.integers(0, 2**48, p, dtype=np.uint64) >> rng.integers(0, 40, p).astype(
            np.uint64)
        start[near_top] = np.uint64(2**64 - 1) - rng.integers(0, 2**40, int(near_top.sum()),
                                                             dtype=np.uint64)
        width = np.where(width32 & (name in WRAP32), 32, 64)
        c = _counter(start, s, width)
        if reboot >= 0:
            c[:, reboot:] = _counter(np.zeros(p, np.uint64), s[:, reboot:], width)
        series[name] = c
    series.update(_gauges(rng, u_out, shape, noise))
    series["oper_status"] = status
    return ts, series


def _gauges(rng: np.random.Generator, u: F, shape: Shape, noise: dict[str, F]
            ) -> dict[str, NDArray[np.uint64]]:
    p, n = u.shape
    congested = np.clip(u - 0.8, 0.0, None) * rng.uniform(0, 5, (p, 1))
    busy = rng.random((p, n)) < congested
    depth = np.where(busy, np.round(rng.lognormal(5.0, 1.5, (p, n))), 0.0) * CELL_BYTES
    mark = np.maximum(depth, np.where(busy | (rng.random((p, n)) < congested * 2),
                                      np.round(rng.lognormal(5.5, 1.5, (p, n))), 0) * CELL_BYTES)

    def walk(level: F, sigma: float) -> F:
        return level + rng.normal(0, sigma, (p, n)).cumsum(axis=1)

    rx_level = walk(rng.uniform(-6, 2, (p, 1)), 2e-4)
    rx_sd = rng.uniform(0.01, 0.03, (p, 1))
    rx = rx_level + rng.normal(0, rx_sd, (p, n))
    tx = walk(rng.uniform(-2, 2, (p, 1)), 1e-4) + rng.normal(0, 0.01, (p, n))
    noise["rx_power_dbm"] = np.broadcast_to(rx_sd, (p, n))
    noise["tx_power_dbm"] = np.broadcast_to(0.01, (p, n))
    noise["temperature_c"] = np.broadcast_to(0.05, (p, n))
    target = rng.uniform(30, 45, (p, 1)) + 15 * u
    alpha = 1 - np.exp(-shape.interval_s / 60.0)
    heat = np.empty((p, n))
    heat[:, 0] = target[:, 0]
    for j in range(1, n):
        heat[:, j] = heat[:, j - 1] + alpha * (target[:, j] - heat[:, j - 1])
    temp = heat + rng.normal(0, 0.05, (p, n))
    as_bits = {
        "queue_depth_bytes": depth, "queue_watermark_bytes": mark,
        "rx_power_dbm": np.round(rx * 100) / 100, "tx_power_dbm": np.round(tx * 100) / 100,
        "temperature_c": np.round(temp * 256) / 256, "egress_tx_util": np.round(u * 1000) / 1000,
    }
    return {k: np.ascontiguousarray(v, np.float64).view(np.uint64) for k, v in as_bits.items()}


def noisy_blocks(seed: int, shape: Shape = DEFAULT_SHAPE, window: int = 60,
                 draws: Draws | None = None) -> Iterator[tuple[str, SeriesBlock]]:
    """Per device and window of ``window`` polls, its block; the same seed, the same data
    (with ``draws`` or without). ``draws`` gets each device's noise scales before its
    first block."""
    rng = np.random.default_rng(seed)
    ids = np.array([CATALOGUE.id_of(m) for m in METRICS], np.uint16)
    for d in range(shape.devices):
        device = f"leaf-{d // 4}-{d % 4}"
        noise: dict[str, F] = {}
        ts, series = _device(rng, shape, reboots=d % 2 == 1, noise=noise)
        raw = np.stack([series[m] for m in METRICS], axis=1).reshape(-1, shape.points)
        metric = np.tile(ids, shape.ports)
        entity = tuple(f"{device}:eth{port + 1}" for port in range(shape.ports)
                       for _ in METRICS)
        present = rng.random(raw.shape) >= 0.0005
        raw = np.where(present, raw, np.uint64(0))
        if draws is not None:
            draws.devices.append({**noise, "present": present.reshape(shape.ports, len(METRICS),
                                                                      shape.points)})
        for a in range(0, shape.points, window):
            b = min(a + window, shape.points)
            yield device, SeriesBlock(ts[a:b].copy(), entity, metric, raw[:, a:b].copy(),
                                      present[:, a:b].copy())
