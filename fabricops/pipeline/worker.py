"""The pipeline worker: telemetry from the bus into rates, events and keyframe segments.

``PipelineWorker.process(messages)`` is one batch: INT reports become INT path
records (:mod:`fabricops.pipeline.int_paths`); telemetry frames are decoded, set aside
the bad ones (undecodable, from the future, unknown metrics dropped from an
otherwise good frame), follow each (device, source) stream in time order
(:class:`~fabricops.pipeline.stream.SeriesStream`), store and publish the
events, and write complete windows as keyframe segments.

Raw frames are never written to the store: the bus is the recovery log. A
window lives in memory (:mod:`fabricops.pipeline.windows`) until it is
written, and the offsets are committed no further than the oldest frame of
an unwritten window, so a worker killed anywhere finds its frames again on
the bus; the store's idempotent writes make the second pass add nothing,
and only events the store did not hold yet are published again. Complete
windows wait in a queue and each batch writes them, oldest first, for at
most ``close_budget_s`` of CPU time, in one transaction: windows that all
end on the same minute are written over the next seconds, never in one long
stall. Small windows are encoded a group at a time (``encode_group_samples``).

A frame is a duplicate only when its identity (device, source, ts_ns) is
held already with every sample it gives; the parts of one instant (a gNMI
target's notification per interface, each a frame) are joined into one frame
in the batch (``join_instants``), and a part that comes in a later batch joins
its window, and steps its series if its instant is the stream's newest. A
frame older than its stream's newest is stored all the same: into its window
if that is still held, else by correcting the stored window
(:mod:`fabricops.pipeline.late`). A record the worker cannot take goes to the
dead-letter topic with its reason; the consumer loop
(:class:`~fabricops.core.consumer.ConsumerLoop`) sets aside anything else
that fails, and the worker forgets the failed batch (``recover``) before it
goes on.

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
from functools import partial

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.bus import DEFAULT_PREFIX, Bus, Message, Topic, topic_name
from fabricops.core.busio import publish_events
from fabricops.core.consumer import ConsumerLoop, ConsumerLoopConfig
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.frame import Frame
from fabricops.core.liveness import Liveness
from fabricops.core.records import Event
from fabricops.pipeline.events import EventConfig, EventRules
from fabricops.pipeline.int_paths import IntPathBook
from fabricops.pipeline.intake import (
    BatchResult,
    FrameIntake,
    frames_of,
    int_path_records,
    join_instants,
    segment_of,
)
from fabricops.pipeline.late import correct_windows
from fabricops.pipeline.stream import SeriesStream
from fabricops.pipeline.stream_bank import StepQueue, StreamBank
from fabricops.pipeline.window_writes import write_complete
from fabricops.pipeline.windows import (
    NO_ORIGIN,
    Origin,
    Partition,
    StreamKey,
    WindowBook,
    frame_order,
)
from fabricops.pipeline.worker_metrics import SetAside, WorkerMetrics
from fabricops.store.records import store_problem
from fabricops.store.store import Store

log = logging.getLogger(__name__)


class PipelineConfig(BaseModel):
    """How a pipeline worker consumes, windows and judges telemetry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str = Field(default="fabricops-pipeline", min_length=1)
    prefix: str = DEFAULT_PREFIX
    keyframe_interval_s: float = Field(default=60.0, gt=0, le=3600)
    close_grace_s: float = Field(default=30.0, ge=0, description="Quiet stream's window wait")
    idle_close_s: float = Field(
        default=30.0, ge=1, description="A source whose frames stopped coming this long "
        "(wall time, no record at all on the bus): its open windows are written")
    close_budget_s: float = Field(
        default=0.15, gt=0, description="CPU time a batch spends writing complete windows "
        "(at least one group of windows encoded together is written per batch)")
    encode_group_samples: int = Field(
        default=1 << 17, ge=1, description="Complete windows are encoded together until "
        "they hold this many samples (about 50 windows of a 2-NIC host, 8 of a 64-port switch)")
    stop_timeout_s: float = Field(
        default=120.0, gt=0, description="Longest wait at stop for the held windows to be "
        "written (a 16k-GPU worker holds ~30 CPU-s of them)")
    max_future_s: float = Field(default=60.0, gt=0, description="Newer frames are rejected")
    poll_timeout_s: float = Field(default=0.5, gt=0)
    max_records: int = Field(default=1000, ge=1)
    give_up_after_s: float = Field(default=300.0, gt=0,
                                   description="No batch done for this long: the worker exits")
    events: EventConfig = EventConfig()


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
        self._bank = StreamBank(self.rules)  # every stream's series state
        self._steps = StepQueue(self._bank)  # frames stepped together at the batch's end
        self._intake = FrameIntake()
        self._kf_ns = round(config.keyframe_interval_s * 1e9)
        self.windows = WindowBook(self._kf_ns)
        self._late: list[Frame] = []
        self.aside = SetAside(self.metrics, self.dead_letters, log)
        self._newest_ns = 0
        self._newest_by_source: dict[str, int] = {}
        self._heard: dict[str, float] = {}  # source -> monotonic time of its last frame
        self._batch = 0
        self._in_batch = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.loop = ConsumerLoop(
            ConsumerLoopConfig(poll_timeout_s=config.poll_timeout_s,
                               max_records=config.max_records,
                               give_up_after_s=config.give_up_after_s),
            bus, self.topics, config.group, self.process, name="pipeline-worker",
            dead_letters=self.dead_letters, liveness=liveness, recover=self.recover,
            hold=self.windows.holds, assigned=self.assigned, drain=self.flush, idle=self.idle,
            registry=registry, log=log)

    def restore(self) -> int:
        """Resume every stream from its checkpoint (saved with each written window).

        The frames of windows not written yet come again from the bus, which
        was committed no further than the oldest of them. Frames an earlier
        version staged in the store are taken back into their windows too.
        Returns the number of staged frames found.
        """
        return self._resume(self.store.stream_checkpoints(), self.store.staged_frames())

    def recover(self) -> int:
        """Forget the batch that failed, and rebuild the rest from the store and memory.

        Called after a batch failed part-way, so that no half-applied state (a
        stream stepped past frames that were never written) survives it: the
        streams resume from their checkpoints and the windows' frames of the
        batches that completed are taken again. If the store cannot be read,
        nothing is changed (the call raises, and is made again). Returns the
        frames taken again."""
        checkpoints = self.store.stream_checkpoints()
        staged = self.store.staged_frames()
        kept = self.windows.kept(drop_batch=self._batch if self._in_batch else None)
        self._in_batch = False
        self._streams.clear()
        self._bank.clear()
        self._steps.clear()
        self.windows.clear()
        self._late.clear()
        self._newest_ns = 0
        self._newest_by_source.clear()
        return self._resume(checkpoints, staged) + self._replay(kept)

    def _resume(self, checkpoints: dict[StreamKey, tuple[int, bytes]],
                staged: list[Frame]) -> int:
        for key, (before_ns, state) in checkpoints.items():
            self._streams[key] = SeriesStream.resume(*key, self.rules, state, self._bank)
            self.windows.written_before[key] = before_ns
        self._replay([(f, NO_ORIGIN) for f in staged])
        return len(staged)

    def _replay(self, frames: list[tuple[Frame, Origin]]) -> int:
        """Take frames again into their streams and windows (no event: the store has them)."""
        result = BatchResult()
        for frame, origin in sorted(frames, key=lambda fo: frame_order(fo[0])):
            self._accept(frame, origin, result)
        self.aside.stepped(result, self._steps.run())
        return len(frames)

    def start(self) -> None:
        """Restore the streams, join the group (BusError if unreachable) and run."""
        self.restore()
        consumer = self.bus.subscribe(self.topics, self.config.group)
        self._stop.clear()
        self._thread = threading.Thread(target=self.loop.run, args=(self._stop, consumer),
                                        name="pipeline-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop consuming; the loop writes every window held (open ones too: frames of
        a later window replayed from the bus are merged into them), commits and leaves
        the group."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.config.stop_timeout_s)
            if self._thread.is_alive():
                log.warning("pipeline worker still writing windows after %.0f s; stopping "
                            "anyway (their frames are delivered again on the next start)",
                            self.config.stop_timeout_s)
            self._thread = None
        if self.loop.liveness is not None:
            self.loop.liveness.forget(self.loop.name)

    def assigned(self, owned: set[Partition]) -> None:
        """The group moved partitions: forget the windows of those another member owns
        now (it reads their frames again from the bus), so they are not written twice.
        A member between two assignments (none yet) keeps what it holds."""
        if owned:
            self.windows.keep_only(owned)

    def process(self, messages: Sequence[Message]) -> BatchResult:
        """One batch (see the module docstring); durable when it returns."""
        self._batch += 1
        self._in_batch = True
        result = BatchResult()
        dead, reject = partial(self.aside.dead, result), partial(self.aside.reject, result)
        paths = int_path_records([m for m in messages if m.topic == self.topics[1]],
                                 self.int_paths, dead, reject)
        frames = frames_of([m for m in messages if m.topic != self.topics[1]],
                           batch=self._batch, dead=dead, reject=reject, intake=self._intake,
                           limit_ns=self.clock_ns() + round(self.config.max_future_s * 1e9))
        instants = join_instants(frames)
        result.joined = sum(parts - 1 for _, _, parts in instants)
        instants.sort(key=lambda fop: frame_order(fop[0]))
        now = time.monotonic()
        for frame, origin, parts in instants:
            self._accept(frame, origin, result, emit=True, parts=parts)
            self._heard[frame.source.value] = now
        self.aside.stepped(result, self._steps.run())
        self._quiet_windows()
        if paths:
            self.store.put_int_paths(paths)
        self._persist(result, budget_s=self.config.close_budget_s)
        self._in_batch = False
        return result

    def idle(self) -> None:
        """No record came: the open windows of sources silent for ``idle_close_s`` are
        complete, and complete windows are written (within the batch budget)."""
        now = time.monotonic()
        silent = {src for src, t in self._heard.items() if now - t >= self.config.idle_close_s}
        self.windows.finish_where(lambda w: w.key[1] in silent)
        if self.windows.complete:
            self._persist(BatchResult(), budget_s=self.config.close_budget_s)

    def _accept(self, frame: Frame, origin: Origin, result: BatchResult, *,
                emit: bool = False, parts: int = 1) -> None:
        """Step the frame's stream (if it is newer) and put it in its window.

        A newer frame is queued to step its stream (``StepQueue``: the batch's
        queued frames are stepped together at its end).
        A frame the stream has stepped past already is late: it joins its
        window if that is held, or waits in ``_late`` for ``correct_windows``
        if its window is written; a frame after the stream's last written
        window that no window holds is one the bus delivers again after a
        restart, and opens its window. A frame whose (device, source, ts_ns)
        is held already with every sample it gives is a duplicate (``parts``:
        the records joined in it, counted so); one giving more is a part of a
        held instant: kept as a late frame is, and, of the stream's newest
        instant, its series stepped too.
        """
        key = (frame.device, frame.source.value)
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = SeriesStream(*key, self.rules, self._bank)
        index = frame.ts_ns // self._kf_ns
        window = self.windows.open.get(key)
        last_ts_ns = self._steps.last_ts_ns(stream)
        if last_ts_ns is not None and frame.ts_ns <= last_ts_ns:
            held = self.windows.find(key, index)
            if held is not None:
                if frame.ts_ns in held.ts_ns and not held.adds(frame):
                    self.aside.duplicate(result, parts)
                    return
                held.add(frame, origin)
                if frame.ts_ns == last_ts_ns:
                    self._steps.add(stream, frame, emit)  # a part of the newest instant
                    result.joined += parts
                else:
                    result.late += parts
                return
            if frame.ts_ns < self.windows.written_before.get(key, 0) or (
                    window is not None and index < window.index):
                self._late.append(frame)
                return
        else:
            self._steps.add(stream, frame, emit)
        self._newest_ns = max(self._newest_ns, frame.ts_ns)
        src = frame.source.value
        self._newest_by_source[src] = max(self._newest_by_source.get(src, 0), frame.ts_ns)
        if window is None or window.index != index:
            window = self.windows.start(key, index)
        window.add(frame, origin)

    def _quiet_windows(self) -> None:
        """Windows whose source has moved ``close_grace_s`` past their end are complete."""
        end, newest = self._kf_ns, self._newest_by_source
        grace = round(self.config.close_grace_s * 1e9)
        self.windows.finish_where(lambda w: (w.index + 1) * end + grace <= newest.get(w.key[1], 0))

    def _persist(self, result: BatchResult, *, budget_s: float | None) -> None:
        """Store and publish the events, write complete windows (for at most ``budget_s``
        of CPU time, None: all) and correct written windows with late frames."""
        started = time.perf_counter()
        if result.events:
            events = [e for e in result.events if store_problem(e) is None]
            if len(events) < len(result.events):
                self.aside.reject(result, "unstorable_event",
                                  f"{len(result.events) - len(events)} events too large for "
                                  "the store dropped")
            result.events = self.store.put_new_events(events)
        if result.events:
            publish_events(self.bus, result.events, source="pipeline",
                           prefix=self.config.prefix)
        self._write_complete(result, budget_s)
        if self._late:
            late, self._late = self._late, []
            fixed = correct_windows(self.store, late, self._kf_ns, segment_of)
            result.late += fixed.stored
            result.segments += fixed.windows
            if fixed.duplicates:
                self.aside.duplicate(result, fixed.duplicates)
        self.metrics.observe(result, time.perf_counter() - started)
        self.metrics.windows.labels("open").set(len(self.windows.open))
        self.metrics.windows.labels("complete").set(len(self.windows.complete))
        for listener in self.on_batch:
            listener(result.events, self._newest_ns)

    def _write_complete(self, result: BatchResult, budget_s: float | None) -> None:
        """Write complete windows for at most ``budget_s`` of CPU (see window_writes)."""
        result.segments += write_complete(
            self.windows, self.store, lambda key: self._streams[key].snapshot(),
            budget_s=budget_s, group_samples=self.config.encode_group_samples)

    def flush(self) -> int:
        """Write every window held now, open ones too (shutdown, tests); segments written."""
        for key in list(self.windows.open):
            self.windows.finish(key)
        result = BatchResult()
        self._persist(result, budget_s=None)
        return result.segments
