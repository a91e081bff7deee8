"""RcaService: the RCA as a member of the ``fabricops-rca`` consumer group.

It consumes ``telemetry.v2`` and ``int.v2``, steps its engine once per
``step_s`` of telemetry time, and publishes each new or revised diagnosis (one
per separate root: concurrent faults are published side by side) on
``diagnoses.v2`` and into the store (if given). A diagnosis is revised (same
id, newer time) when its root or fault type changes, when its confidence has
risen by ``revise_rise`` since it was last published (a first guess at 0.6
that firms up to 0.95 reaches remediation's confidence floor now, not at the
next republication), or every ``republish_s`` while the incident lasts.
Offsets are committed after the diagnoses of a batch are stored.

Behind the stream (the consumer hands over full batches: a backlog after a
restart or an outage, or a fabric whose telemetry takes more than a core to
fold and analyse every ``step_s``), a due step waits for the batch that
empties the backlog, or for a poll that brings nothing. Meanwhile it runs
only once the time every partition has reached (the newest frame read from
each) is ``catch_up_s`` past the last step, and it analyses that time, not
the newest frame's: the partitions of a backlog are read unevenly, and at the
newest time the devices of those read later would look silent. A partition
read to its end is not waited for (its devices have sent nothing newer: a
collector that stopped), nor one more than ``max_skew_s`` behind the newest
frame, nor one the member no longer owns. So the RCA analyses less often
and catches up, instead of falling further behind with a step every
``step_s`` of old telemetry. The engine's warm-up steps (after a start they
only build baselines, and cost little) keep to every ``step_s`` of that
time, so a restart into a backlog warms up on its first seconds, not on
``warmup_steps`` times ``catch_up_s`` of it. On a live stream a step runs
after the last poll of a tick and sees every device's latest frame.
Deferred steps are counted, ``fabricops_rca_unanalysed_seconds`` shows the
telemetry time not yet analysed, and a step late by more than two
``step_s`` is logged (once a minute at most).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.bus import (
    DEFAULT_PREFIX,
    Bus,
    BusError,
    Message,
    Topic,
    record_headers,
    topic_name,
)
from fabricops.core.busio import ConsumerLoopConfig, GroupConsumer, frames_from_messages
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.intreport import IntBatch, IntBatchError
from fabricops.core.liveness import Liveness
from fabricops.core.logthrottle import ThrottledLog
from fabricops.core.records import Diagnosis
from fabricops.core.topology import Topology
from fabricops.core.wire_frame import EntityTables
from fabricops.rca.engine import RcaConfig, RcaEngine
from fabricops.rca.model import RcaModel
from fabricops.store.store import Store

log = logging.getLogger(__name__)


class RcaServiceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str = "fabricops-rca"
    prefix: str = DEFAULT_PREFIX
    step_s: float = Field(default=1.0, gt=0, description="Telemetry time between analyses")
    max_records: int = Field(default=500, ge=1, description="Records a poll hands over")
    catch_up_s: float = Field(
        default=10.0, gt=0,
        description="Behind the stream, telemetry time between analyses at most (a due "
        "step waits for the backlog's end until then; see the module docstring)")
    max_skew_s: float = Field(
        default=60.0, gt=0,
        description="Behind the stream, a step analyses the time every partition has "
        "reached; a partition further behind the newest frame than this is not waited for")
    republish_s: float = Field(default=30.0, gt=0)
    revise_rise: float = Field(
        default=0.1, gt=0, le=1,
        description="Confidence gained since a diagnosis was last published that revises it")
    engine: RcaConfig = Field(default_factory=RcaConfig)


class RcaService:
    """See the module docstring."""

    def __init__(self, config: RcaServiceConfig, bus: Bus, topology: Topology,
                 model: RcaModel | None, store: Store | None = None,
                 jobs: Mapping[str, Sequence[str]] | None = None,
                 registry: CollectorRegistry | None = None,
                 liveness: Liveness | None = None) -> None:
        self.config = config
        self.bus = bus
        self._tables = EntityTables()  # each device's last entity table
        self.store = store
        self.engine = RcaEngine(topology, model, config.engine, jobs)
        reg = registry if registry is not None else CollectorRegistry()
        self.m_steps = Counter("fabricops_rca_steps", "RCA analysis steps", registry=reg)
        self.m_diag = Counter("fabricops_rca_diagnoses", "Diagnoses published", registry=reg)
        self.m_rejected = Counter("fabricops_rca_rejected", "Records the RCA could not decode",
                                  registry=reg)
        self.m_latency = Histogram("fabricops_rca_step_seconds", "Time of one analysis step",
                                   registry=reg)
        self.m_deferred = Counter(
            "fabricops_rca_steps_deferred",
            "Due analysis steps put off while the RCA was behind the stream", registry=reg)
        self.m_unanalysed = Gauge(
            "fabricops_rca_unanalysed_seconds",
            "Telemetry time since the last analysis step (up to catch_up_s while behind)",
            registry=reg)
        self.m_outage = Gauge(
            "fabricops_rca_outage_switches",
            "Switches that stopped reporting at once, set aside as a collection outage",
            registry=reg)
        self.m_context_deferred = Gauge(
            "fabricops_rca_context_deferred",
            "Candidates near a symptom left for later steps (past context_rows a step)",
            registry=reg)
        self._warn = ThrottledLog(log, interval_s=60.0)
        self._topics = [topic_name(Topic.TELEMETRY, config.prefix),
                        topic_name(Topic.INT, config.prefix)]
        self._out = topic_name(Topic.DIAGNOSES, config.prefix)
        self._last_step_ns = -1
        self._partition_ts: dict[tuple[str, int], int] = {}  # newest frame time read from each
        self._read_to_end: set[tuple[str, int]] = set()  # partitions with nothing more to read
        self._published: dict[str, tuple[str, str, int, float]] = {}  # root, type, time, confidence
        self.dead_letters = DeadLetterBox(bus, config.group, prefix=config.prefix, registry=reg)
        self._consumer = GroupConsumer(bus, self._topics, config.group, self.process,
                                       name="rca", log=log,
                                       config=ConsumerLoopConfig(max_records=config.max_records),
                                       dead_letters=self.dead_letters, liveness=liveness,
                                       idle=self.idle, assigned=self.assigned,
                                       caught_up=self.caught_up, registry=reg)
        self.diagnoses: list[Diagnosis] = []

    def start(self) -> None:
        self._consumer.start()

    def stop(self) -> None:
        self._consumer.stop()

    def process(self, messages: list[Message]) -> list[Diagnosis]:
        """Fold a batch in, analyse if a step is due; return what was published."""
        int_topic = self._topics[1]
        rejects: list[tuple[Message, str]] = []
        self.engine.ingest_frames(frames_from_messages(
            (m for m in messages if m.topic != int_topic), rejects=rejects, tables=self._tables,
            newest=self._partition_ts))
        for m in messages:
            if m.topic == int_topic:
                try:
                    self.engine.ingest_int(IntBatch.decode(m.value))
                except IntBatchError as exc:
                    rejects.append((m, str(exc)))
        for m, why in rejects:
            self.m_rejected.inc()
            self.dead_letters.put(m, "undecodable", why)
        newest = self._step_due()
        if newest is None:
            return []
        waited = newest - self._last_step_ns
        self.m_unanalysed.set(waited / 1e9)
        if len(messages) < self.config.max_records:
            return self._step(newest)
        mark = self._watermark(newest)  # behind: what every partition has reached
        every = self.config.step_s if self.engine.warming_up else self.config.catch_up_s
        if mark - self._last_step_ns < every * 1e9:
            self.m_deferred.inc()
            if waited >= 2 * self.config.step_s * 1e9:  # not just the rest of one tick
                self._warn.warning(
                    "behind", "rca: behind the telemetry stream: last analysis %.1f s of "
                    "telemetry ago; analysing at most every %g s until it catches up",
                    waited / 1e9, self.config.catch_up_s)
            return []
        return self._step(mark)

    def _watermark(self, newest: int) -> int:
        """The newest frame time every partition read from within ``max_skew_s`` of
        ``newest``, and not read to its end, has reached."""
        floor = newest - self.config.max_skew_s * 1e9
        return min((ts for where, ts in self._partition_ts.items()
                    if ts >= floor and where not in self._read_to_end), default=newest)

    def caught_up(self, done: set[tuple[str, int]]) -> None:
        """After a poll: the partitions read to their end, which a step behind the
        stream does not wait for."""
        self._read_to_end = done

    def assigned(self, owned: set[tuple[str, int]]) -> None:
        """The partitions this member owns changed: those it gave up no longer hold
        back the time every partition has reached."""
        for where in [w for w in self._partition_ts if w not in owned]:
            del self._partition_ts[where]

    def idle(self) -> list[Diagnosis]:
        """A poll brought nothing: the backlog is drained, so a step put off runs now."""
        newest = self._step_due()
        return [] if newest is None else self._step(newest)

    def _step_due(self) -> int | None:
        """The newest telemetry time if it is ``step_s`` past the last step, else None."""
        newest = self.engine.view.newest_ns
        if newest < 0 or newest - self._last_step_ns < self.config.step_s * 1e9:
            return None
        return newest

    def _step(self, now: int) -> list[Diagnosis]:
        self._last_step_ns = now
        self.m_unanalysed.set(max(self.engine.view.newest_ns - now, 0) / 1e9)
        started = time.perf_counter()
        result = self.engine.step(now)
        self.m_steps.inc()
        self.m_latency.observe(time.perf_counter() - started)
        self.m_outage.set(result.outage_switches)
        self.m_context_deferred.set(result.context_deferred)
        if result.outage_switches:
            self._warn.warning(
                "outage", "rca: %d switches stopped reporting at once: a collection outage "
                "(a collector, its host or the management network?), not analysed as switch "
                "faults", result.outage_switches)
        due = [d for d in result.diagnoses if self._due(d)]
        for d in due:
            self.bus.publish(self._out, d.root.encode(), [d.encode()],
                             record_headers(Topic.DIAGNOSES, "rca"))
        if due and self.store is not None:
            try:
                self.store.put_diagnoses(due)
            except Exception as exc:
                log.error("rca: could not store diagnoses %s: %s",
                          ", ".join(d.id for d in due), exc)
        for d in due:
            self._published[d.id] = (d.root, d.fault_type, d.ts_ns, d.confidence)
            self.diagnoses.append(d)
            self.m_diag.inc()
        return due

    def _due(self, d: Diagnosis) -> bool:
        last = self._published.get(d.id)
        if last is None or last[:2] != (d.root, d.fault_type):
            return True
        if d.confidence - last[3] >= self.config.revise_rise:
            return True
        return d.ts_ns - last[2] >= self.config.republish_s * 1e9


__all__ = ["BusError", "RcaService", "RcaServiceConfig"]
