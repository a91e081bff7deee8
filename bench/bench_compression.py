"""Bytes per sample of the keyframe codec (kf3, and the previous kf2, kf1) against raw, zstd
and Gorilla, on two datasets in one run, one core, CPU time (``time.process_time``).

Datasets (each cut into one block per device and ``--window`` polls, as the
pipeline stores them):

* ``noisy``: :mod:`noisy_telemetry` (bursty on/off collectives, heavy-tailed
  bursts, idle ports, sensor noise and resolution, resets and wraps at 2**32
  and 2**64, rare state changes): 2 leaves x 52 ports x 19 metrics = 1,976
  series x ``--noisy-points`` polls, seed ``--seed``;
* ``simulated``: the ``demo`` scenario of the simulator (512-GPU leaf-spine, one
  training job) for ``--minutes`` at 1 s ticks with every metric it emits, and
  gray loss (0.1 %) on a leaf-spine link from half-way for a sixth of the run;
  blocks of 60 s.

Per block:

1. raw: 16 B a sample (8 B timestamp + 8 B value);
2. zstd-3 (``--level``) of the block's raw columns: timestamps, then each series;
3. Gorilla (PyPI ``gorillacompression``, the timestamp delta-of-delta and float
   XOR coding of the Gorilla paper, pure Python) on a random share of the series
   (``--gorilla-sample``): timestamps in seconds, counters as float64;
4. kf1 (format version 1, bit packing), kf2 (version 2, entropy coding) and kf3
   (version 3: kf2, and counters coded from a sibling counter; the default), all
   with ``gauge_bounds`` defaults: every block decoded and compared: counters and
   states bit for bit, gauges against their bound.

On the noisy dataset the run also prints its noise floor (:mod:`noise_floor`):
a lower bound on what any codec keeping counters exact and gauges within
their bound can reach, from the noise the generator drew. A ratio target that
needs fewer bytes than the floor is reported as one no codec can meet.

    python bench/bench_compression.py [--window 60] [--noisy-points 3600] [--minutes 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zstandard
from gorillacompression import PairsEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent))

from noise_floor import noise_floor
from noisy_telemetry import METRICS, Draws, Shape, noisy_blocks

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.pipeline.keyframe import (
    ENCODING,
    ENCODINGS,
    SeriesBlock,
    block_from_frames,
    decode_block,
    encode_block,
    gauge_bounds,
)
from fabricops.pipeline.segment_merge import merge_blocks
from fabricops.simulator.scenario import build_simulator, load_preset

SIM_WINDOW_S = 60
FAULT_LINK = "leaf-3:eth56~spine-5:eth16"
TARGET_BYTES, TARGET_RATIO, TARGET_DECODE = 0.5, 5.0, 20e6
KF = tuple(ENCODINGS.items())
"""Every format version, and its name; ``ENCODING`` (the default) is the new codec."""
MERGED = "merged"
"""The new codec on blocks merged as ``fabricops store merge`` merges stored segments."""
CODECS = ("zstd", *ENCODINGS.values())


@dataclass
class Tally:
    """Totals over every block of one dataset."""

    blocks: int = 0
    samples: int = 0
    size: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    encode_s: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    decode_s: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    gorilla_bytes: int = 0
    gorilla_samples: int = 0
    exact_samples: int = 0
    exact_failures: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    gauge_err: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))
    gauge_bound: dict[int, float] = field(default_factory=dict)


def simulated_blocks(minutes: float) -> Iterator[tuple[str, SeriesBlock]]:
    duration = round(minutes * 60)
    start, length = duration // 2, max(1, duration // 6)
    fault = {"type": "gray_loss", "entity": FAULT_LINK, "start_s": start,
             "duration_s": length, "params": {"loss_rate": 1e-3}}
    scenario = load_preset("demo").model_copy(
        update={"duration_s": float(duration), "faults": [fault]})
    sim = build_simulator(scenario)
    for begin in range(0, duration, SIM_WINDOW_S):
        groups: dict[tuple[str, str], list[Frame]] = defaultdict(list)
        for _ in range(min(SIM_WINDOW_S, duration - begin)):
            sim.step()
            for f in sim.frames():
                groups[(f.device, str(f.source))].append(f)
        yield from ((":".join(k), block_from_frames(f)) for k, f in groups.items())


def timed(t: Tally, codec: str, encode: Callable[[], bytes],
          decode: Callable[[bytes], object]) -> tuple[bytes, object]:
    started = time.process_time()
    payload = encode()
    t.encode_s[codec] += time.process_time() - started
    started = time.process_time()
    decoded = decode(payload)
    t.decode_s[codec] += time.process_time() - started
    t.size[codec] += len(payload)
    return payload, decoded


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


def check(codec: str, block: SeriesBlock, decoded: SeriesBlock, bounds: np.ndarray,
          t: Tally) -> None:
    gauge = CATALOGUE.is_float[block.metric]
    same = (np.array_equal(decoded.ts_ns, block.ts_ns) and decoded.entity == block.entity
            and np.array_equal(decoded.present, block.present)
            and np.array_equal(decoded.raw[~gauge], block.raw[~gauge]))
    t.exact_failures[codec] += 0 if same else 1
    for row in np.flatnonzero(gauge).tolist():
        keep = block.present[row]
        want, got = block.raw[row][keep].view(np.float64), decoded.raw[row][keep].view(np.float64)
        finite = np.isfinite(want)
        if not np.array_equal(want[~finite], got[~finite], equal_nan=True):
            t.exact_failures[codec] += 1
        mid = int(block.metric[row])
        err = float(np.abs(got[finite] - want[finite]).max(initial=0.0))
        t.gauge_err[(codec, mid)] = max(t.gauge_err[(codec, mid)], err)
        t.gauge_bound[mid] = float(bounds[row])


def measure(block: SeriesBlock, level: int, rng: np.random.Generator, share: float,
            t: Tally) -> bytes:
    """Every codec on ``block``; returns the new codec's payload (what the store keeps)."""
    bounds = gauge_bounds(block.metric)
    cctx, dctx = zstandard.ZstdCompressor(level=level), zstandard.ZstdDecompressor()
    timed(t, "zstd", lambda: cctx.compress(raw_columns(block)), dctx.decompress)
    kept = b""
    for version, codec in KF:
        def encode(v: int = version) -> bytes:
            return encode_block(block, bounds, level=level, version=v)
        payload, decoded = timed(t, codec, encode, decode_block)
        assert isinstance(decoded, SeriesBlock)
        check(codec, block, decoded, bounds, t)
        kept = payload if codec == ENCODING else kept
    t.blocks += 1
    t.samples += int(block.present.sum())
    gauge = CATALOGUE.is_float[block.metric]
    t.exact_samples += int(block.present[~gauge].sum())
    gorilla_sample(block, rng, share, t)
    return kept


def measure_merge(held: list[tuple[SeriesBlock, bytes]], level: int, t: Tally) -> None:
    """The store's merge of one device's consecutive blocks, from their new-codec
    payloads: decoding them, merging and encoding is timed as its encode; the merged
    block must decode to the merge of the blocks, exactly. zstd on the merged raw
    columns is its baseline."""
    whole = merge_blocks([b for b, _ in held])
    zstd = zstandard.ZstdCompressor(level=level)
    t.size[f"zstd {MERGED}"] += len(zstd.compress(raw_columns(whole)))
    merged: list[SeriesBlock] = []

    def merge() -> bytes:
        merged.append(merge_blocks([decode_block(p) for _, p in held]))
        return encode_block(merged[0], gauge_bounds(merged[0].metric), level=level)

    _, decoded = timed(t, MERGED, merge, decode_block)
    t.exact_failures[MERGED] += decoded != merged[0]


def raw_columns(block: SeriesBlock) -> bytes:
    """What zstd is given: the block's timestamps, then each series."""
    return block.ts_ns.tobytes() + block.raw.tobytes()


def report(name: str, what: str, t: Tally, level: int, merge: int,
           floor: float | None = None) -> None:
    """Print the dataset's sizes, speeds, bounds and targets; ``floor``: its noise floor
    in bytes per sample, where known."""
    zstd = f"zstd-{level}"
    per = {"raw (8 B timestamp + 8 B value)": 16.0,
           f"{zstd} on raw columns per block": t.size["zstd"] / t.samples,
           "Gorilla (sample of series)": t.gorilla_bytes / max(t.gorilla_samples, 1),
           **{f"{c} ({'new' if c == ENCODING else 'previous'} codec)": t.size[c] / t.samples
              for _, c in KF},
           f"{zstd}, {merge} blocks merged": t.size[f"zstd {MERGED}"] / t.samples,
           f"{ENCODING}, {merge} blocks merged (store merge)": t.size[MERGED] / t.samples}
    print(f"\n== {name}: {what}")
    print(f"blocks: {t.blocks:,}, samples: {t.samples:,} (Gorilla on {t.gorilla_samples:,})")
    for label, value in per.items():
        print(f"  {label:44s} {value:8.4f} B/sample")
    if floor is not None:
        print(f"  {'noise floor (no codec goes below)':44s} {floor:8.4f} B/sample")
    new = per[f"{ENCODING} (new codec)"]
    base = {k.split(" (")[0].split(" on")[0]: v for k, v in per.items()
            if ENCODING not in k and "merged" not in k}
    print(f"{ENCODING} is " + ", ".join(f"{v / new:,.1f}x smaller than {k}"
                                        for k, v in base.items()))
    print("speed, one core, M samples per CPU-second (time.process_time); merge: decode,")
    print("merge and encode of the blocks a merged block holds:")
    for codec in (*CODECS, MERGED):
        print(f"  {codec:6s} encode {t.samples / t.encode_s[codec] / 1e6:7.2f}   decode "
              f"{t.samples / t.decode_s[codec] / 1e6:7.2f}")
    for mid in sorted(t.gauge_bound):
        bound = t.gauge_bound[mid]
        errs = {c: t.gauge_err[(c, mid)] for _, c in KF}
        ok = all(e <= bound for e in errs.values())
        print(f"  gauge {CATALOGUE.by_id(mid).name:22s} bound {bound:<7g} max |error| "
              + " ".join(f"{c} {e:<11.6g}" for c, e in errs.items())
              + f" within: {'yes' if ok else 'NO'}")
    for codec in (*(c for _, c in KF), MERGED):
        bad = t.exact_failures[codec]
        print(f"  {codec} counters and states exact (and NaN/inf gauges): "
              f"{'yes' if bad == 0 else f'NO ({bad} blocks)'} ({t.exact_samples:,} samples)")
    merged = per[f"{ENCODING}, {merge} blocks merged (store merge)"]
    forms = ((f"blocks as written ({ENCODING})", new, base[zstd], t.decode_s[ENCODING]),
             (f"after the store merge ({merge} blocks)", merged,
              per[f"{zstd}, {merge} blocks merged"], t.decode_s[MERGED]))
    for form, size, generic, decode_s in forms:
        print(f"targets, {form}" + (f", {size / floor:.2f}x the noise floor:" if floor else ":"))
        for label, ok, need in (
                (f"<= {TARGET_BYTES} B/sample", size <= TARGET_BYTES, TARGET_BYTES),
                (f">= {TARGET_RATIO:g}x smaller than {zstd} (same blocks)",
                 generic / size >= TARGET_RATIO, generic / TARGET_RATIO),
                (f">= {TARGET_RATIO:g}x smaller than Gorilla",
                 base["Gorilla"] / size >= TARGET_RATIO, base["Gorilla"] / TARGET_RATIO),
                (f"decode >= {TARGET_DECODE / 1e6:g} M samples per CPU-second",
                 t.samples / decode_s >= TARGET_DECODE, None)):
            print(f"  {label}: {'met' if ok else 'NOT met'}")
            if not ok and floor is not None and need is not None and need < floor:
                print(f"    needs <= {need:.4f} B/sample, below the noise floor: no codec can")


def run(blocks: Iterator[tuple[str, SeriesBlock]], level: int, share: float, seed: int,
        merge: int) -> Tally:
    """Every block measured; each device's blocks also merged ``merge`` at a time."""
    t, rng = Tally(), np.random.default_rng(seed)
    held: dict[str, list[tuple[SeriesBlock, bytes]]] = defaultdict(list)
    for key, block in blocks:
        held[key].append((block, measure(block, level, rng, share, t)))
        if len(held[key]) == merge:
            measure_merge(held.pop(key), level, t)
    for rest in held.values():
        measure_merge(rest, level, t)
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=60, help="noisy: polls per block")
    parser.add_argument("--noisy-points", type=int, default=3600)
    parser.add_argument("--minutes", type=float, default=10.0, help="simulated run length")
    parser.add_argument("--gorilla-sample", type=float, default=0.02)
    parser.add_argument("--level", type=int, default=3, help="zstd level (baseline and kf)")
    parser.add_argument("--seed", type=int, default=1, help="noisy data and Gorilla sample")
    parser.add_argument("--only", choices=("noisy", "simulated"), default=None)
    parser.add_argument("--merge", type=int, default=10,
                        help="blocks per device merged into one, as `fabricops store merge` "
                             "merges ten one-minute segments into one of ten minutes")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    if args.only != "simulated":
        shape, draws = Shape(points=args.noisy_points), Draws()
        blocks = noisy_blocks(args.seed, shape, args.window, draws)
        t = run(blocks, args.level, args.gorilla_sample, args.seed, args.merge)
        floor = noise_floor(draws)
        assert floor.samples == t.samples
        series = shape.devices * shape.ports * len(METRICS)
        report("noisy", f"noisy_telemetry seed {args.seed}, {series:,} series x "
               f"{shape.points:,} polls, blocks of {args.window} polls", t, args.level,
               args.merge, floor.per_sample())
    if args.only != "noisy":
        t = run(simulated_blocks(args.minutes), args.level, args.gorilla_sample, args.seed,
                args.merge)
        report("simulated", f"demo scenario, {args.minutes:g} min at 1 s, gray loss on "
               f"{FAULT_LINK}, blocks of {SIM_WINDOW_S} s", t, args.level, args.merge)


if __name__ == "__main__":
    main()
