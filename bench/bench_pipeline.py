"""The pipeline worker end to end: samples per CPU-second, CPU per frame (the worker's
cost is mostly per frame, so small devices' frames cost more a sample), bytes
written per sample, and the longest batch, on one core.

The twin (``--family``, ``--gpus``) runs a training job for ``--seconds`` at 1 s
ticks; every tick's frames are published on the in-process bus, as the
collectors would. Then one ``PipelineWorker`` on a SQLite store in a temporary
folder consumes them in batches of ``--batch`` records (decode, rates and
events, keyframe segments as windows complete) and, at the end, writes the
windows still held (``flush``, timed apart). Only the worker's work is timed
(CPU time, ``time.process_time``); the twin's is not. Bytes written are what
the process handed to ``write``/``pwrite`` while the worker ran (``wchar`` of
``/proc/self/io``: the database, its WAL and journal), per sample. What was
built before the worker starts is settled, as a command does
(:mod:`fabricops.core.heap`). The
longest batch, in CPU seconds, is the stall a window close causes: windows
are ``--window`` seconds, so every stream completes one each ``--window``
simulated seconds, and each batch writes them for at most
``--close-budget`` CPU seconds.

With ``--merge-span S``, the store's segments are then merged as ``fabricops
store merge --span S`` merges them (every segment, once the worker is done),
and its CPU time, bytes written and the segments' bytes before and after are
shown.

With ``--upkeep-every W`` the store upkeep's passes (``StoreUpkeep.run_once``:
the merge into ``--merge-span`` spans, default 600 s, each span once it ended;
no prune) run every ``W`` wall seconds on a
thread of their own while the worker ingests, in the same process, as ``serve
pipeline`` runs them (there every 600 s, an hour after a span ended). The
worker's CPU is then its own thread's (``time.thread_time``), the upkeep's
its thread's, and the process's is shown beside them per simulated second;
the longest batch is also shown in wall seconds: the two threads share one
core and one interpreter lock, so a batch waits while the merge runs. "With
every sample merged once" adds the upkeep's CPU per merged sample (its passes'
fixed cost included) for every sample ingested. Spans of 240 points or more
have their residual modes screened (``keyframe_modes``): ten-minute spans
measure what the service merges, two-minute ones a dearer path.

    python bench/bench_pipeline.py [--family rail_optimized] [--gpus 2048]
        [--seconds 130] [--window 60] [--batch 1000] [--close-budget 0.15]
        [--merge-span 0] [--upkeep-every 0]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from fabricops.core import heap
from fabricops.core.bus import DEFAULT_PREFIX, Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.membus import MemoryBus, MemoryBusConfig
from fabricops.evaluation.scenarios import shape_params
from fabricops.pipeline.segment_merge import MergeConfig, MergeResult, merge_segments
from fabricops.pipeline.upkeep import StoreUpkeep, UpkeepConfig
from fabricops.pipeline.worker import PipelineConfig, PipelineWorker
from fabricops.simulator.builders import build
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec
from fabricops.store.store import Store, StoreConfig


def written() -> int:
    """Bytes this process has passed to write calls so far (Linux), else 0."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="rail_optimized",
                        choices=("leaf_spine", "fat_tree", "rail_optimized"))
    parser.add_argument("--gpus", type=int, default=2048, help="GPUs (k for a fat-tree)")
    parser.add_argument("--seconds", type=int, default=130, help="simulated seconds")
    parser.add_argument("--window", type=float, default=60.0, help="keyframe window, s")
    parser.add_argument("--batch", type=int, default=1000, help="records per batch")
    parser.add_argument("--merge-span", type=float, default=0.0,
                        help="then merge the segments into spans of this many seconds")
    parser.add_argument("--close-budget", type=float, default=0.15,
                        help="CPU seconds a batch spends writing windows")
    parser.add_argument("--upkeep-every", type=float, default=0.0,
                        help="run the store upkeep's merge every this many wall seconds "
                             "while ingesting (0: off)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    params = shape_params(args.family, args.gpus)
    if args.family != "fat_tree":
        params.update(leaf_radix=64, spine_radix=64)
    topo = build(args.family, **params)
    sim = Simulator(topo, SimConfig(seed=1))
    hosts = sum(1 for _ in topo.hosts())
    sim.add_job(JobSpec(hosts=hosts, placement="random", compute_s=0.5,
                        comm_bytes_per_nic=30e9))
    bus = MemoryBus(MemoryBusConfig(retention_records=10**8, retention_bytes=1 << 36))
    bus.start()
    sink = BusFrameSink(bus, DEFAULT_PREFIX)
    samples = n_frames = 0
    print(f"{args.family} {args.gpus}: {topo.summary()['switches']} switches, "
          f"{topo.summary()['nics']} NICs; simulating {args.seconds} s ...", flush=True)
    for _ in range(args.seconds):
        sim.step()
        frames = sim.frames()
        samples += sum(f.n_samples for f in frames)
        n_frames += len(frames)
        sink.publish_frames(frames)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(StoreConfig(url=f"sqlite:///{tmp}/fabricops.db"))
        store.start()
        config = PipelineConfig(max_future_s=1e9, keyframe_interval_s=args.window,
                                max_records=args.batch, close_budget_s=args.close_budget)
        worker = PipelineWorker(config, bus, store)
        consumer = bus.subscribe([topic_name(Topic.TELEMETRY, DEFAULT_PREFIX)], config.group)
        heap.settle()  # as `serve pipeline` does once started
        upkeep = Upkeep(store, args.upkeep_every, args.merge_span or 600.0)
        clock = time.thread_time if args.upkeep_every else time.process_time
        cpu, longest, longest_wall, batches, segments = 0.0, 0.0, 0.0, 0, 0
        worst = (0.0, 0, 0, 0)  # CPU-s, frames, events, segments of the longest batch
        held = 0  # the most bytes of sample arrays held in windows
        w0, p0 = written(), time.process_time()
        upkeep.start()
        while True:
            messages = consumer.poll(0.0, args.batch)
            if not messages:
                break
            t, wall = clock(), time.perf_counter()
            result = worker.process(messages)
            consumer.commit()
            spent = clock() - t
            longest_wall = max(longest_wall, time.perf_counter() - wall)
            cpu += spent
            if batches % 10 == 0:  # outside the timed part: what the windows hold
                held = max(held, sum(f.raw.nbytes + f.entity_idx.nbytes + f.metric.nbytes
                                     for w in worker.windows.all() for f in w.frames))
            if spent > longest:
                longest = spent
                worst = (spent, result.frames, result.n_events, result.segments)
            batches += 1
            segments += result.segments
        t = clock()
        final = worker.flush()
        flush_cpu = clock() - t
        upkeep.stop()
        process_cpu = time.process_time() - p0
        wrote = written() - w0
        db = sum(p.stat().st_size for p in Path(tmp).iterdir())
        merged = merge_report(store, args.merge_span) \
            if args.merge_span and not args.upkeep_every else ""
        store.stop()
    total = cpu + flush_cpu
    print(f"samples {samples:,} in {batches:,} batches; worker CPU {total:.2f} s = "
          f"{samples / total / 1e6:.2f} M samples per CPU-second")
    print(f"frames {n_frames:,} of {samples / max(n_frames, 1):,.0f} samples each: "
          f"{total / max(n_frames, 1) * 1e3:.3f} ms of worker CPU a frame")
    print(f"final flush {flush_cpu:.2f} CPU-s ({final:,} segments of windows still held); "
          f"windows held at most {held / 1e9:.2f} GB of sample arrays")
    print(f"written {wrote / samples:.2f} B/sample ({wrote / 1e6:,.0f} MB); database on disk "
          f"at the end {db / samples:.2f} B/sample; {segments + final:,} segments")
    print(f"longest batch {longest:.2f} CPU-s ({worst[1]:,} frames, {worst[2]:,} events, "
          f"{worst[3]:,} windows written; every stream completes a {args.window:g} s window "
          f"at once); CPU per simulated second {total / args.seconds:.2f} s")
    if merged:
        print(merged)
    if args.upkeep_every:
        print(upkeep.report(longest_wall, process_cpu, args.seconds, total, samples))


class Upkeep:
    """The store upkeep's passes on a thread of their own while the worker ingests
    (nothing when ``every_s`` is 0): each merges every stream's spans of ``span_s`` as
    soon as a span ended; the thread's CPU time and what it merged."""

    def __init__(self, store: Store, every_s: float, span_s: float) -> None:
        config = UpkeepConfig(interval_s=max(every_s, 1e-3), merge_after_s=0.0,
                              spans=MergeConfig(span_s=span_s), prune=False)
        # the only worker owns every stream (a worker's own set, the streams with an
        # open window, is empty once its flush has closed them)
        self.keeper = StoreUpkeep(config, store)
        self.every_s, self.span_s = every_s, span_s
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="upkeep")
        self.cpu, self.passes, self.merged = 0.0, 0, MergeResult()

    def start(self) -> None:
        if self.every_s:
            self.thread.start()

    def stop(self) -> None:
        """One last pass once the worker is done (what its flush wrote), then stop."""
        if self.every_s:
            self.done.set()
            self.thread.join()

    def _run(self) -> None:
        t = time.thread_time()
        while True:
            last = self.done.wait(self.every_s)
            result, _ = self.keeper.run_once()
            self.passes += 1
            if result is not None:
                m = self.merged
                m.spans, m.segments_in = m.spans + result.spans, m.segments_in + result.segments_in
                m.samples += result.samples
            if last:
                break
        self.cpu = time.thread_time() - t

    def report(self, longest_wall: float, process_cpu: float, seconds: int,
               ingest_cpu: float, samples: int) -> str:
        """What the passes did and cost; the CPU per simulated second of ingest with
        every sample merged once (a run merges only the spans that ended in it)."""
        m = self.merged
        if not m.samples:
            return (f"upkeep every {self.every_s:g} s: {self.passes} passes, nothing "
                    f"merged (no {self.span_s:g} s span ended; simulate more seconds)")
        steady = (ingest_cpu + self.cpu / m.samples * samples) / seconds
        return (f"upkeep every {self.every_s:g} s, in the process: {self.passes} passes "
                f"merged {m.segments_in:,} segments into {m.spans:,} spans of "
                f"{self.span_s:g} s ({m.samples:,} samples), {self.cpu:.2f} CPU-s = "
                f"{m.samples / self.cpu / 1e6:.2f} M samples per CPU-second\n"
                f"longest batch {longest_wall:.2f} wall-s; process CPU per simulated "
                f"second {process_cpu / seconds:.2f} s; with every sample merged once "
                f"{steady:.2f} s")


def merge_report(store: Store, span_s: float) -> str:
    """Merge every segment into spans of ``span_s``; what it cost."""
    w0, t = written(), time.process_time()
    result = merge_segments(store, older_than_ns=store.newest_ns() + 1,
                            config=MergeConfig(span_s=span_s))
    cpu, wrote = time.process_time() - t, written() - w0
    return (f"merge into {span_s:g} s spans: {result.segments_in:,} segments into "
            f"{result.spans:,} ({result.samples:,} samples), {cpu:.2f} CPU-s = "
            f"{result.samples / cpu / 1e6:.2f} M samples per CPU-second; written "
            f"{wrote / result.samples:.2f} B/sample; those segments "
            f"{result.bytes_in / result.samples:.3f} -> {result.bytes_out / result.samples:.3f}"
            " B/sample")


if __name__ == "__main__":
    main()
