"""The pipeline worker: telemetry from the bus into rates, events and keyframe segments.

``PipelineWorker.process(messages)`` is one batch: INT reports become INT path
records (:mod:`fabricops.pipeline.int_paths`); telemetry frames are decoded, set aside
the bad ones (undecodable, from the future, unknown metrics dropped from an
otherwise good frame), follow each (device, source) stream in time order
(:class:`~fabricops.pipeline.stream.SeriesStream`), store and publish the
events, stage the frames of windows still open, and close every window that
is complete into one keyframe segment. Only then are the offsets committed,
so a worker killed anywhere in a batch finds its frames again (staged in the
store, or re-delivered by the bus) and the store's idempotent writes make the
second pass add nothing.

A frame is a duplicate only when its identity (device, source, ts_ns) is
held already; a frame older than its stream's newest is stored all the same:
into its window if that is still open, else by correcting the stored window
(:mod:`fabricops.pipeline.late`). A record the worker cannot take goes to the
dead-letter topic with its reason; the consumer loop
(:class:`~fabricops.core.consumer.ConsumerLoop`) sets aside anything else
that fails, and rebuilds the worker's state from the store (``recover``)
before it goes on.

A window is ``keyframe_interval_s`` of one stream. It closes when a frame of
a later window arrives for that stream, or when the newest frame of the same
source is ``close_grace_s`` past the window's end (a device that went quiet;
sources are apart because their clocks may be: SNMP stamps the poll time,
gNMI the device's own).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.bus import DEFAULT_PREFIX, Bus, Message, Topic, topic_name
from fabricops.core.busio import publish_events
from fabricops.core.consumer import ConsumerLoop, ConsumerLoopConfig
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.frame import Frame, FrameError
from fabricops.core.intreport import IntBatch, IntBatchError
from fabricops.core.liveness import Liveness
from fabricops.core.logthrottle import ThrottledLog
from fabricops.core.records import Event
from fabricops.pipeline.admit import admit_samples
from fabricops.pipeline.events import EventConfig, EventRules
from fabricops.pipeline.int_paths import IntPathBook
from fabricops.pipeline.keyframe import ENCODING, block_from_frames, encode_block, gauge_bounds
from fabricops.pipeline.late import correct_windows, held_frames
from fabricops.pipeline.stream import SeriesStream
from fabricops.pipeline.worker_metrics import WorkerMetrics
from fabricops.store.records import IntPathRecord, SegmentRecord, merge_int_paths, store_problem
from fabricops.store.store import Store

log = logging.getLogger(__name__)
StreamKey = tuple[str, str]


class PipelineConfig(BaseModel):
    """How a pipeline worker consumes, windows and judges telemetry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str = Field(default="fabricops-pipeline", min_length=1)
    prefix: str = DEFAULT_PREFIX
    keyframe_interval_s: float = Field(default=60.0, gt=0, le=3600)
    close_grace_s: float = Field(default=30.0, ge=0, description="Quiet stream's window wait")
    max_future_s: float = Field(default=60.0, gt=0, description="Newer frames are rejected")
    poll_timeout_s: float = Field(default=0.5, gt=0)
    max_records: int = Field(default=1000, ge=1)
    give_up_after_s: float = Field(default=300.0, gt=0,
                                   description="No batch done for this long: the worker exits")
    events: EventConfig = EventConfig()


@dataclass
class BatchResult:
    """What one batch did (the counts also go to the worker's metrics)."""

    frames: int = 0
    late: int = 0
    events: list[Event] = field(default_factory=list)
    segments: int = 0
    rejected: dict[str, int] = field(default_factory=dict)

    @property
    def n_events(self) -> int:
        return len(self.events)

    def reject(self, reason: str, n: int = 1) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + n


@dataclass
class _Window:
    index: int
    frames: list[Frame] = field(default_factory=list)
    ts_ns: set[int] = field(default_factory=set)

    def add(self, frame: Frame) -> None:
        self.frames.append(frame)
        self.ts_ns.add(frame.ts_ns)


class PipelineWorker:
    """A member of the pipeline's consumer group (see the module docstring)."""

    def __init__(self, config: PipelineConfig, bus: Bus, store: Store,
                 registry: CollectorRegistry | None = None,
                 clock_ns: Callable[[], int] = time.time_ns,
                 int_paths: IntPathBook | None = None,
                 liveness: Liveness | None = None) -> None:
        self.config = config
        self.bus = bus
        self.store = store
        registry = registry if registry is not None else CollectorRegistry()
        self.metrics = WorkerMetrics(registry)
        self.dead_letters = DeadLetterBox(bus, config.group, prefix=config.prefix,
                                          registry=registry)
        self.clock_ns = clock_ns
        self.rules = EventRules(config.events)
        self.int_paths = int_paths or IntPathBook(None)
        self.topics = [topic_name(Topic.TELEMETRY, config.prefix),
                       topic_name(Topic.INT, config.prefix)]
        # called after every batch with its events and the newest frame time (ns)
        self.on_batch: list[Callable[[Sequence[Event], int], None]] = []
        self._streams: dict[StreamKey, SeriesStream] = {}
        self._windows: dict[StreamKey, _Window] = {}
        self._late: list[Frame] = []
        self._warn = ThrottledLog(log)
        self._newest_ns = 0
        self._newest_by_source: dict[str, int] = {}
        self._kf_ns = round(config.keyframe_interval_s * 1e9)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.loop = ConsumerLoop(
            ConsumerLoopConfig(poll_timeout_s=config.poll_timeout_s,
                               max_records=config.max_records,
                               give_up_after_s=config.give_up_after_s),
            bus, self.topics, config.group, self.process, name="pipeline-worker",
            dead_letters=self.dead_letters, liveness=liveness, recover=self.recover,
            registry=registry, log=log)

    def restore(self) -> int:
        """Resume every stream from its checkpoint and reopen its staged window.

        A checkpoint is saved with each closed window; the staged frames newer
        than it are replayed (without publishing their events again, which the
        store already holds), so the streams are exactly as before the stop.
        Returns the number of staged frames found.
        """
        for key, state in self.store.stream_states().items():
            self._streams[key] = SeriesStream.resume(*key, self.rules, state)
        frames = self.store.staged_frames()
        closed: list[tuple[StreamKey, _Window]] = []
        for frame in sorted(frames, key=lambda f: (f.device, f.source.value, f.ts_ns)):
            _, done = self._accept(frame, BatchResult(), emit=False, replay=True)
            if done is not None:
                closed.append(done)
        self._persist(BatchResult(), [], closed)
        return len(frames)

    def recover(self) -> int:
        """Forget everything held in memory and ``restore`` from the store.

        Called after a batch failed part-way, so that no half-applied state
        (a stream stepped past frames that were never staged) survives it."""
        self._streams.clear()
        self._windows.clear()
        self._late.clear()
        self._newest_ns = 0
        self._newest_by_source.clear()
        return self.restore()

    def start(self) -> None:
        """Restore staged state, join the group (BusError if unreachable) and run."""
        self.restore()
        consumer = self.bus.subscribe(self.topics, self.config.group)
        self._stop.clear()
        self._thread = threading.Thread(target=self.loop.run, args=(self._stop, consumer),
                                        name="pipeline-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self.loop.liveness is not None:
            self.loop.liveness.forget(self.loop.name)

    def process(self, messages: Sequence[Message]) -> BatchResult:
        """One batch (see the module docstring); durable when it returns."""
        result = BatchResult()
        paths = self._int_paths([m for m in messages if m.topic == self.topics[1]], result)
        frames = self._decode([m for m in messages if m.topic != self.topics[1]], result)
        frames.sort(key=lambda f: (f.device, f.source.value, f.ts_ns))
        closed: list[tuple[StreamKey, _Window]] = []
        accepted: list[Frame] = []
        for frame in frames:
            ok, done = self._accept(frame, result, emit=True)
            if done is not None:
                closed.append(done)
            if ok:
                accepted.append(frame)
        closed.extend(self._quiet_windows())
        if paths:
            self.store.put_int_paths(paths)
        self._persist(result, accepted, closed)
        return result

    def _int_paths(self, messages: Sequence[Message], result: BatchResult) -> list[IntPathRecord]:
        out: list[IntPathRecord] = []
        for msg in messages:
            try:
                records = self.int_paths.records(IntBatch.decode(msg.value))
            except IntBatchError as exc:
                self._dead(result, msg, "undecodable_int", str(exc))
                continue
            for record in records:
                problem = store_problem(record)
                if problem:
                    self._reject(result, "unstorable_int_path", problem)
                else:
                    out.append(record)
        return merge_int_paths(out)

    def _decode(self, messages: Sequence[Message], result: BatchResult) -> list[Frame]:
        limit = self.clock_ns() + round(self.config.max_future_s * 1e9)
        out: list[Frame] = []
        for msg in messages:
            try:
                frame = Frame.decode(msg.value)
            except FrameError as exc:
                self._dead(result, msg, "undecodable", str(exc))
                continue
            if frame.ts_ns > limit:
                self._dead(result, msg, "future", f"frame of {frame.device} at {frame.ts_ns} "
                           f"ns is {(frame.ts_ns - limit) / 1e9:.0f} s past the allowed clock "
                           "skew")
                continue
            problem = store_problem(frame)
            if problem:
                self._dead(result, msg, "unstorable", problem)
                continue
            frame, dropped = admit_samples(frame)
            for d in dropped:
                self._reject(result, d.reason, d.detail, n=d.count)
            out.append(frame)
        return out

    def _reject(self, result: BatchResult, reason: str, why: str, n: int = 1) -> None:
        result.reject(reason, n)
        self.metrics.rejected.labels(reason).inc(n)
        self._warn.warning(reason, "pipeline set aside %s: %s", reason, why)

    def _dead(self, result: BatchResult, msg: Message, reason: str, why: str) -> None:
        """A whole record the worker cannot take: counted, and on the dead-letter topic."""
        result.reject(reason)
        self.metrics.rejected.labels(reason).inc()
        self.dead_letters.put(msg, reason, why)

    def _accept(self, frame: Frame, result: BatchResult, *, emit: bool,
                replay: bool = False) -> tuple[bool, tuple[StreamKey, _Window] | None]:
        """Step the frame's stream and window it: was it new, and the window it closed.

        A frame newer than its stream is stepped and windowed. An older one is
        late: it joins its window if that is open, or waits in ``_late`` for
        ``correct_windows``; unless ``replay``, where it is a staged frame the
        checkpoint already covers. A frame whose (device, source, ts_ns) is
        held already is a duplicate.
        """
        key = (frame.device, frame.source.value)
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = SeriesStream(*key, self.rules)
        index = frame.ts_ns // self._kf_ns
        window = self._windows.get(key)
        if stream.last_ts_ns is not None and frame.ts_ns <= stream.last_ts_ns and not replay:
            if window is not None and window.index == index:
                if frame.ts_ns in window.ts_ns:
                    self._duplicate(result)
                    return False, None
                window.add(frame)
                result.late += 1
                return True, None
            self._late.append(frame)
            return False, None
        if stream.last_ts_ns is None or frame.ts_ns > stream.last_ts_ns:
            self._step(stream, frame, result, emit)
        self._newest_ns = max(self._newest_ns, frame.ts_ns)
        src = frame.source.value
        self._newest_by_source[src] = max(self._newest_by_source.get(src, 0), frame.ts_ns)
        closed = None
        if window is not None and window.index != index:
            closed = (key, window)
            window = None
        if window is None:
            window = self._windows[key] = _Window(index)
        window.add(frame)
        return True, closed

    def _duplicate(self, result: BatchResult, n: int = 1) -> None:
        result.reject("duplicate", n)
        self.metrics.rejected.labels("duplicate").inc(n)

    def _step(self, stream: SeriesStream, frame: Frame, result: BatchResult, emit: bool) -> None:
        step = stream.step(frame, emit=emit)
        result.frames += 1
        result.events.extend(step.events)
        if step.reset:
            self.metrics.resets.inc()
            log.info("counters of %s (%s) were reset at %d ns", stream.device, stream.source,
                     frame.ts_ns)
        for entity, metric in step.backwards:
            self._reject(result, "counter_backwards", f"{metric} of {entity} went down at "
                         f"{frame.ts_ns} ns without a reset of the device; rate left unknown")

    def _quiet_windows(self) -> list[tuple[StreamKey, _Window]]:
        grace = round(self.config.close_grace_s * 1e9)
        quiet = [k for k, w in self._windows.items()
                 if (w.index + 1) * self._kf_ns + grace <= self._newest_by_source.get(k[1], 0)]
        return [(k, self._windows.pop(k)) for k in quiet]

    def _persist(self, result: BatchResult, accepted: list[Frame],
                 closed: list[tuple[StreamKey, _Window]]) -> None:
        started = time.perf_counter()
        if result.events:
            events = [e for e in result.events if store_problem(e) is None]
            if len(events) < len(result.events):
                self._reject(result, "unstorable_event", f"{len(result.events) - len(events)} "
                             "events too large for the store dropped")
                result.events = events
        if result.events:
            self.store.put_events(result.events)
            publish_events(self.bus, result.events, source="pipeline",
                           prefix=self.config.prefix)
        if accepted:
            self.store.stage_frames(accepted)
        for (device, source), window in closed:
            t0 = window.index * self._kf_ns
            frames = held_frames(self.store, device, source, t0, t0 + self._kf_ns)
            frames.update((f.ts_ns, f) for f in window.frames)
            segment = self._segment(device, source, list(frames.values()))
            result.segments += self.store.close_window(
                [segment], device=device, source=source, before_ts_ns=max(frames) + 1,
                state=self._streams[(device, source)].snapshot(),
                window=(t0, t0 + self._kf_ns))
        if self._late:
            late, self._late = self._late, []
            fixed = correct_windows(self.store, late, self._kf_ns, self._segment)
            result.late += fixed.stored
            result.segments += fixed.windows
            if fixed.duplicates:
                self._duplicate(result, fixed.duplicates)
        self.metrics.observe(result, time.perf_counter() - started)
        for listener in self.on_batch:
            listener(result.events, self._newest_ns)

    def _segment(self, device: str, source: str, frames: list[Frame]) -> SegmentRecord:
        frames = sorted(frames, key=lambda f: f.ts_ns)
        seqs = [f.seq for f in frames]
        block = block_from_frames(frames)
        bounds = gauge_bounds(block.metric)
        payload = encode_block(block, bounds)
        return SegmentRecord(
            device=device, source=source, t_start_ns=int(block.ts_ns[0]),
            t_end_ns=int(block.ts_ns[-1]), first_seq=min(seqs), last_seq=max(seqs),
            n_points=len(block.ts_ns), n_series=len(block.entity), encoding=ENCODING,
            max_error=float(bounds.max(initial=0.0)), payload=payload)

    def flush(self) -> int:
        """Close every open window now (shutdown, tests); segments written."""
        closed = list(self._windows.items())
        self._windows.clear()
        result = BatchResult()
        self._persist(result, [], closed)
        return result.segments
