"""Bytes per sample of the kf1 keyframe codec against raw, zstd and Gorilla, one core.

Reference dataset: the ``demo`` scenario (512-GPU leaf-spine, one training job on
56 of its 64 servers) run for ``--minutes`` at 1 s ticks with every metric the
simulator emits (23 per host port, 18 per switch port), and one fault mid-run:
gray loss (0.1 %) on a leaf-spine link from half-way for a sixth of the run.
Frames are grouped per (device, source) into 60 s windows, one block each, and
processed window by window. Per block:

1. raw: 16 B a sample (8 B timestamp + 8 B value);
2. zstd (same level) of the block's raw columns: timestamps, then each series;
3. Gorilla (PyPI ``gorillacompression``, pure Python) on a random sample of the
   series (``--gorilla-sample``): timestamp/value pairs, timestamps in seconds,
   counters as float64 (not exact above 2**53);
4. kf1 with ``gauge_bounds`` defaults; encode and decode timed, every block
   decoded and compared: counters and states bit for bit, gauges against the bound.

    python bench/bench_compression.py [--minutes 60] [--gorilla-sample 0.02]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import zstandard
from gorillacompression import PairsEncoder

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.pipeline.keyframe import (
    SeriesBlock,
    block_from_frames,
    decode_block,
    encode_block,
    gauge_bounds,
)
from fabricops.simulator.engine import Simulator
from fabricops.simulator.scenario import build_simulator, load_preset

WINDOW_S = 60
FAULT_LINK = "leaf-3:eth56~spine-5:eth16"
TARGET_BYTES, TARGET_VS_GORILLA, TARGET_DECODE = 0.3, 4.0, 10e6


@dataclass
class Tally:
    """Totals over every block of the run."""

    blocks: int = 0
    samples: int = 0
    kf1_bytes: int = 0
    zstd_bytes: int = 0
    gorilla_bytes: int = 0
    gorilla_samples: int = 0
    gorilla_series: int = 0
    encode_s: float = 0.0
    decode_s: float = 0.0
    exact_samples: int = 0
    exact_failures: int = 0
    gauge_err: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    gauge_bound: dict[int, float] = field(default_factory=dict)


def make_simulator(minutes: float) -> tuple[Simulator, int, str]:
    duration = round(minutes * 60)
    start, length = duration // 2, max(1, duration // 6)
    fault = {"type": "gray_loss", "entity": FAULT_LINK, "start_s": start,
             "duration_s": length, "params": {"loss_rate": 1e-3}}
    scenario = load_preset("demo").model_copy(
        update={"duration_s": float(duration), "faults": [fault]})
    what = f"gray_loss on {FAULT_LINK} from {start} s for {length} s"
    return build_simulator(scenario), duration, what


def window_frames(sim: Simulator, ticks: int) -> dict[tuple[str, str], list[Frame]]:
    groups: dict[tuple[str, str], list[Frame]] = defaultdict(list)
    for _ in range(ticks):
        sim.step()
        for f in sim.frames():
            groups[(f.device, str(f.source))].append(f)
    return groups


def zstd_raw(block: SeriesBlock, cctx: zstandard.ZstdCompressor) -> int:
    return len(cctx.compress(block.ts_ns.tobytes() + block.raw.tobytes()))


def gorilla_sample(block: SeriesBlock, rng: np.random.Generator, share: float,
                   t: Tally) -> None:
    ts_s = (block.ts_ns // 1_000_000_000).tolist()
    gauge = CATALOGUE.is_float[block.metric]
    for row in np.flatnonzero(rng.random(block.n_series) < share).tolist():
        keep = block.present[row]
        raw = block.raw[row][keep]
        values = raw.view(np.float64) if gauge[row] else raw.astype(np.float64)
        pairs = zip([s for s, k in zip(ts_s, keep.tolist(), strict=True) if k],
                    values.tolist(), strict=True)
        t.gorilla_bytes += len(PairsEncoder.encode_all(pairs)["encoded"])
        t.gorilla_samples += int(keep.sum())
        t.gorilla_series += 1


def check(block: SeriesBlock, decoded: SeriesBlock, bounds: np.ndarray, t: Tally) -> None:
    gauge = CATALOGUE.is_float[block.metric]
    same = (np.array_equal(decoded.ts_ns, block.ts_ns) and decoded.entity == block.entity
            and np.array_equal(decoded.present, block.present)
            and np.array_equal(decoded.raw[~gauge], block.raw[~gauge]))
    t.exact_samples += int(block.present[~gauge].sum())
    t.exact_failures += 0 if same else 1
    for row in np.flatnonzero(gauge).tolist():
        keep = block.present[row]
        want, got = block.raw[row][keep].view(np.float64), decoded.raw[row][keep].view(np.float64)
        finite = np.isfinite(want)
        if not np.array_equal(want[~finite], got[~finite], equal_nan=True):
            t.exact_failures += 1
        mid = int(block.metric[row])
        err = float(np.abs(got[finite] - want[finite]).max(initial=0.0))
        t.gauge_err[mid] = max(t.gauge_err[mid], err)
        t.gauge_bound[mid] = float(bounds[row])


def measure_block(block: SeriesBlock, level: int, cctx: zstandard.ZstdCompressor,
                  rng: np.random.Generator, share: float, t: Tally) -> None:
    bounds = gauge_bounds(block.metric)
    started = time.perf_counter()
    payload = encode_block(block, bounds, level=level)
    t.encode_s += time.perf_counter() - started
    started = time.perf_counter()
    decoded = decode_block(payload)
    t.decode_s += time.perf_counter() - started
    t.blocks += 1
    t.samples += int(block.present.sum())
    t.kf1_bytes += len(payload)
    t.zstd_bytes += zstd_raw(block, cctx)
    gorilla_sample(block, rng, share, t)
    check(block, decoded, bounds, t)


def run(minutes: float, share: float, level: int, seed: int) -> tuple[Tally, str]:
    sim, duration, fault = make_simulator(minutes)
    t, rng = Tally(), np.random.default_rng(seed)
    cctx = zstandard.ZstdCompressor(level=level)
    for start in range(0, duration, WINDOW_S):
        for frames in window_frames(sim, min(WINDOW_S, duration - start)).values():
            measure_block(block_from_frames(frames), level, cctx, rng, share, t)
    return t, fault


def report(t: Tally, minutes: float, share: float, level: int, fault: str) -> None:
    per = {"raw (8 B timestamp + 8 B value)": 16.0,
           f"zstd-{level} on raw columns per block": t.zstd_bytes / t.samples,
           "Gorilla (sample, see below)": t.gorilla_bytes / max(t.gorilla_samples, 1),
           "fabricops kf1": t.kf1_bytes / t.samples}
    kf1 = per["fabricops kf1"]
    print(f"dataset: 512-GPU leaf-spine, {minutes:g} min at 1 s, {fault}")
    print(f"blocks: {t.blocks:,} (one per device and {WINDOW_S} s window), "
          f"samples: {t.samples:,} (every metric the simulator emits: 18 per switch port, "
          "23 per host port; no INT hop metrics)")
    for name, value in per.items():
        print(f"  {name:38s} {value:8.4f} B/sample  ({value * t.samples / 1e6:10.1f} MB)")
    print(f"  Gorilla sample: {share:.1%} of series ({t.gorilla_series:,} series-windows, "
          f"{t.gorilla_samples:,} samples); timestamps in s; counters as float64, "
          "inexact above 2**53")
    print("  zstd and Gorilla sizes leave out entity names and metric ids; kf1 includes them")
    ratios = {k.split(" (")[0]: v / kf1 for k, v in per.items() if k != "fabricops kf1"}
    print("kf1 is " + ", ".join(f"{r:,.1f}x smaller than {k}" for k, r in ratios.items()))
    enc, dec = t.samples / t.encode_s, t.samples / t.decode_s
    print(f"speed, one core: encode {enc / 1e6:.2f} M samples/s, decode {dec / 1e6:.2f} "
          f"M samples/s (all {t.blocks:,} blocks)")
    for mid in sorted(t.gauge_err):
        bound, err = t.gauge_bound[mid], t.gauge_err[mid]
        print(f"  gauge {CATALOGUE.by_id(mid).name:24s} bound {bound:<8g} max |error| "
              f"{err:<12.7g} within bound: {'yes' if err <= bound else 'NO'}")
    print(f"counters and states bit-exact, NaN/inf exact: "
          f"{'yes' if t.exact_failures == 0 else f'NO ({t.exact_failures} failures)'} "
          f"({t.exact_samples:,} exact samples compared)")
    gorilla = ratios["Gorilla"]
    for name, ok in ((f"<= {TARGET_BYTES} B/sample", kf1 <= TARGET_BYTES),
                     (f">= {TARGET_VS_GORILLA:g}x smaller than Gorilla",
                      gorilla >= TARGET_VS_GORILLA),
                     (f"decode >= {TARGET_DECODE / 1e6:g} M samples/s", dec >= TARGET_DECODE)):
        print(f"target {name}: {'met' if ok else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--gorilla-sample", type=float, default=0.02)
    parser.add_argument("--level", type=int, default=3, help="zstd level (kf1 and baseline)")
    parser.add_argument("--seed", type=int, default=1, help="of the Gorilla sample")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    t, fault = run(args.minutes, args.gorilla_sample, args.level, args.seed)
    report(t, args.minutes, args.gorilla_sample, args.level, fault)


if __name__ == "__main__":
    main()
