"""Series blocks for the keyframe codec tests: metric ids, and a leaf's ports (octets and
packets)."""

from __future__ import annotations

import numpy as np

from fabricops.core.catalogue import CATALOGUE
from fabricops.pipeline import keyframe_refs as kr
from fabricops.pipeline.keyframe import SeriesBlock
from tests.pipeline.keyframe_bytes import SECOND, T0

COUNTER = CATALOGUE.id_of("in_octets")
GAUGE = CATALOGUE.id_of("temperature_c")
STATE = CATALOGUE.id_of("oper_status")
IN_OCTETS, IN_PKTS = CATALOGUE.id_of("in_octets"), CATALOGUE.id_of("in_pkts")
OUT_OCTETS, OUT_PKTS = CATALOGUE.id_of("out_octets"), CATALOGUE.id_of("out_pkts")


def block(metric: list[int], raw: np.ndarray, present: np.ndarray | None = None,
          ts: np.ndarray | None = None) -> SeriesBlock:
    """Series of ``metric`` ids, one a port of leaf-0, at 1 s polls from ``T0`` (or
    ``ts``), every point present (or ``present``)."""
    raw = np.atleast_2d(np.asarray(raw, dtype=np.uint64))
    n = raw.shape[1]
    return SeriesBlock(
        ts_ns=T0 + np.arange(n, dtype=np.int64) * SECOND if ts is None else ts,
        entity=tuple(f"leaf-0:eth{i}" for i in range(len(metric))),
        metric=np.array(metric, np.uint16), raw=raw,
        present=np.ones(raw.shape, bool) if present is None else present)


def port_block(ports: int = 12, n: int = 60, seed: int = 0, wrap32: bool = True,
               reboot_at: int | None = 40) -> SeriesBlock:
    """``ports`` ports of one leaf, in and out octets and packets: bursty on/off rates,
    packets = octets over a frame size with noise; port 0's packets wrap at 2**32, every
    counter of port 1 restarts from 0 at ``reboot_at``, a few points are absent."""
    rng = np.random.default_rng(seed)
    gaps = SECOND + rng.integers(-8_000_000, 8_000_000, n)
    ts = T0 + np.cumsum(gaps).astype(np.int64)
    rows, entity, metric = [], [], []
    for p in range(ports):
        for side in ("in", "out"):
            on = (np.arange(n) + rng.integers(0, 9)) % 9 < rng.integers(2, 7)
            rate = np.where(on, rng.uniform(3e10, 4.8e10), rng.uniform(0, 1e8))
            octets = np.round(rate * rng.normal(1.0, 0.01, n) * gaps / 1e9).astype(np.int64)
            size = 4158.0 - 4074.0 * np.clip(rng.uniform(0.02, 0.1) + rng.normal(0, 0.002, n),
                                             0.0, 0.5)
            pkts = np.round(octets / size).astype(np.int64)
            start = rng.integers(0, 2**48, 2, dtype=np.uint64)
            o_cum = start[0] + np.cumsum(octets).astype(np.uint64)
            p_cum = start[1] + np.cumsum(pkts).astype(np.uint64)
            if p == 0 and wrap32:
                p_cum = (p_cum - start[1] + np.uint64(2**32 - 3_000_000)) & np.uint64(2**32 - 1)
            if p == 1 and reboot_at is not None:
                o_cum[reboot_at:] = np.cumsum(octets[reboot_at:]).astype(np.uint64)
                p_cum[reboot_at:] = np.cumsum(pkts[reboot_at:]).astype(np.uint64)
            rows += [o_cum, p_cum]
            entity += [f"leaf-0:eth{p + 1}"] * 2
            metric += [IN_OCTETS, IN_PKTS] if side == "in" else [OUT_OCTETS, OUT_PKTS]
    raw = np.vstack(rows)
    present = rng.random(raw.shape) >= 0.01
    raw[~present] = 0
    return SeriesBlock(ts, tuple(entity), np.array(metric, np.uint16), raw, present)


def references_of(b: SeriesBlock) -> kr.References:
    """The references the encoder chooses for ``b``'s rows (all counters here)."""
    from fabricops.pipeline.keyframe_series import ffill

    ids = {e: i for i, e in enumerate(dict.fromkeys(b.entity))}
    return kr.choose(ffill(b.raw, b.present), np.array([ids[e] for e in b.entity]))
