"""The SNMP poller: GETBULK walks of many switches, frames out to a sink.

Each target is walked every ``interval_s`` (or as a SamplingPolicy asks) on the
poller's own thread and asyncio loop. At most ``max_in_flight`` walks run at once.
A target that does not answer (after its timeout and retries) is marked down; from
then on it is only probed, one try of one small request outside the walk budget,
so a dead switch never holds a slot that answering switches need, every
``down_probe_interval_s`` (5 s) or its interval if shorter: a switch back from
an outage is polled again within that. An outage is logged once when it starts,
with the cause, and once when it ends, with its length; answers from elsewhere
than asked and frames the sink refuses are counted and logged at most once per
cause every 30 s, with their count.

Describe once, then poll values only. The first walk of a target also reads its
description (port ids, speeds, which columns it has, sensor encodings; see
:mod:`fabricops.collectors.snmp_decode`); later walks ask only for the dynamic
columns the device has, plus ``sysUpTime`` and ``ifTableLastChange``. When
``sysUpTime`` went back (the agent restarted: its counters are reset, not
wrapped) or ``ifTableLastChange`` moved, the same poll walks the description again
before decoding; so does every ``describe_every_polls``-th poll if that is set. A
row the decoder does not use is counted in ``rows_skipped{reason}`` and never
causes a describe. ``TargetStatus.last_walk`` says what the last poll asked for.

SNMPv1 and SNMPv2c go through a small native client: one UDP socket for every
target, an answer taken only from the address and port its request went to and
with that request's id (any other datagram is counted and ignored). SNMPv3 (USM)
authPriv with MD5, SHA or SHA-256 and AES-128 goes through a native client
(:mod:`fabricops.collectors.snmp_usm_client`, within 2x of SNMPv2c's CPU), other
protocols through pysnmp. The other clients are in
:mod:`fabricops.collectors.snmp_transport`; walks in
:mod:`fabricops.collectors.snmp_walk`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from prometheus_client import CollectorRegistry

from fabricops.collectors import snmp_decode as dec
from fabricops.collectors.snmp_config import SnmpPollerConfig, SnmpTarget, targets_from_inventory
from fabricops.collectors.snmp_counters import Clocks, Discontinuity
from fabricops.collectors.snmp_metrics import SnmpMetrics
from fabricops.collectors.snmp_transport import Peer, PollError, V2cClient, V3Client
from fabricops.collectors.snmp_usm_client import UsmClient
from fabricops.collectors.snmp_usm_client import supports as usm_supports
from fabricops.collectors.snmp_walk import WalkLimits, WalkStats, walk
from fabricops.core.logthrottle import Outage, OutageLines, ThrottledLog
from fabricops.core.records import SamplingPolicy
from fabricops.core.sinks import FrameSink
from fabricops.core.snmp_mib import SYS_NAME, Column, Oid

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TargetStatus:
    """Health of one target; ``up`` is None until its first poll ends."""

    device: str
    up: bool | None = None
    polls: int = 0
    consecutive_failures: int = 0
    last_ok_ns: int = 0
    last_error: str = ""
    last_walk: WalkStats | None = None  # what the last good poll asked for and got


@dataclass
class _Target:
    target: SnmpTarget
    status: TargetStatus
    seq: int = 0
    since_describe: int = 0
    description: dec.DeviceDescription | None = None
    columns: tuple[Column, ...] = ()
    clocks: Clocks | None = None
    tracker: dec.CounterTracker = field(default_factory=dec.CounterTracker)
    lock: asyncio.Lock | None = None  # created on the poller's loop
    wake: asyncio.Event | None = None
    outage: Outage | None = None


class SnmpPoller:
    """Polls ``config.targets`` and publishes one frame per successful poll to ``sink``.

    Inert until ``start``; ``stop`` ends the loop. ``collect_once`` polls every
    target now and waits (tools, tests). Thread-safe: ``apply_policy``, ``status``.
    ``loop_factory`` makes the event loop the poller runs on, whose clock and
    datagram endpoints it uses (tests pass one with a virtual clock).
    """

    def __init__(self, config: SnmpPollerConfig, sink: FrameSink,
                 registry: CollectorRegistry | None = None, *,
                 loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
                 ) -> None:
        self.config = config
        self.sink = sink
        self._loop_factory = loop_factory
        self._warnings = ThrottledLog(log)
        self._outage_lines = OutageLines(log, "SNMP targets")
        self.metrics = SnmpMetrics(registry if registry is not None else CollectorRegistry())
        self._targets = {t.device: _Target(t, TargetStatus(t.device)) for t in config.targets}
        self.metrics.prepare(list(self._targets))
        self._policies: dict[str, SamplingPolicy] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._v2c: V2cClient | None = None
        self._v3: V3Client | None = None
        self._usm: UsmClient | None = None
        self._walks: asyncio.Semaphore | None = None
        self._probes: asyncio.Semaphore | None = None

    def start(self, schedule: bool = True) -> None:
        """Start the loop thread; with ``schedule``, poll every target at its interval."""
        loop = self._loop = self._loop_factory()
        self._thread = threading.Thread(target=loop.run_forever, name="snmp-poller",
                                        daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._setup(schedule), loop).result(timeout=30)

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._teardown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = self._thread = None
        self._warnings.flush()
        self._outage_lines.flush()

    def collect_once(self, timeout_s: float = 120.0) -> dict[str, TargetStatus]:
        """Poll every target once, now and concurrently (within the limits); wait."""
        if self._loop is None:
            raise RuntimeError("SNMP poller is not started")
        asyncio.run_coroutine_threadsafe(self._poll_all(), self._loop).result(timeout_s)
        return self.status()

    async def _poll_all(self) -> None:
        await asyncio.gather(*(self._poll(s) for s in self._targets.values()))

    def status(self) -> dict[str, TargetStatus]:
        return {d: s.status for d, s in self._targets.items()}

    def apply_policy(self, policy: SamplingPolicy) -> None:
        """Follow a sampling policy (``device`` ``"*"`` for all); newer ones win."""
        with self._lock:
            held = self._policies.get(policy.device)
            if held is None or held.ts_ns <= policy.ts_ns:
                self._policies[policy.device] = policy
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._wake, policy.device)

    def interval_of(self, device: str) -> float:
        """The sampling interval in force for ``device``, in seconds."""
        now = time.time_ns()
        with self._lock:
            for key in (device, "*"):
                p = self._policies.get(key)
                if p is not None and (p.expires_ns is None or p.expires_ns > now):
                    return p.interval_s
        return self._targets[device].target.interval_s

    async def _setup(self, schedule: bool) -> None:
        loop = asyncio.get_running_loop()
        self._walks = asyncio.Semaphore(self.config.max_in_flight)
        self._probes = asyncio.Semaphore(self.config.max_probes_in_flight)
        errors = self.metrics.errors
        _, self._v2c = await loop.create_datagram_endpoint(
            lambda: V2cClient(errors.labels("malformed_datagram").inc, self._foreign,
                              errors.labels("unmatched_datagram").inc),
            family=socket.AF_INET)
        for state in self._targets.values():
            state.lock, state.wake = asyncio.Lock(), asyncio.Event()
            if state.target.credentials.version == "v3" and usm_supports(state.target):
                self._usm = self._usm or await UsmClient.open(
                    on_malformed=errors.labels("malformed_datagram").inc,
                    on_unmatched=errors.labels("unmatched_datagram").inc)
            elif state.target.credentials.version == "v3":
                self._v3 = self._v3 or V3Client()
                await self._v3.connect(state.target)
        if schedule:
            n = max(1, len(self._targets))
            self._tasks = [asyncio.create_task(self._schedule(s, i / n))
                           for i, s in enumerate(self._targets.values())]

    async def _teardown(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        if self._v2c is not None and self._v2c.transport is not None:
            self._v2c.transport.close()
        if self._v3 is not None:
            self._v3.close()
        if self._usm is not None:
            self._usm.close()

    def _foreign(self, source: Peer, asked: Peer) -> None:
        """An answer to a request in flight from elsewhere than asked: ignored, counted."""
        self.metrics.errors.labels("foreign_datagram").inc()
        self._warnings.warning("SNMP answers from elsewhere than asked", "SNMP answer from "
                               "%s:%d to a request sent to %s:%d ignored", *source, *asked)

    def _wake(self, device: str) -> None:
        for d, state in self._targets.items():
            if (device in ("*", d)) and state.wake is not None:
                state.wake.set()

    async def _schedule(self, state: _Target, phase: float) -> None:
        """Poll ``state`` every interval, starting ``phase`` of an interval from now."""
        loop = asyncio.get_running_loop()
        started = loop.time() - self.interval_of(state.target.device) * (1 - phase)
        while not self._stopping:
            interval = self.interval_of(state.target.device)
            if state.status.up is False:
                interval = min(interval, self.config.down_probe_interval_s)
            due = started + interval
            if due > loop.time() and await self._woken(state, due - loop.time()):
                continue  # the interval changed: recompute when this poll is due
            started = loop.time()
            await self._poll(state)

    @staticmethod
    async def _woken(state: _Target, delay_s: float) -> bool:
        """Sleep ``delay_s``; True if a policy change woke the target first."""
        assert state.wake is not None
        state.wake.clear()
        waiter = asyncio.ensure_future(state.wake.wait())
        try:
            done, _ = await asyncio.wait({waiter}, timeout=delay_s)
        finally:
            waiter.cancel()
        return bool(done)

    async def _poll(self, state: _Target) -> None:
        """Walk one target, publish its frame and record its health; never raises."""
        assert state.lock is not None
        async with state.lock:
            t0 = time.perf_counter()
            try:
                if state.status.up is False:
                    await self._probe(state)
                ts_ns, samples, change, stats = await self._collect(state)
            except PollError as exc:
                self._failed(state, exc)
                return
            except Exception as exc:  # a defect here must not end the target's schedule
                where = state.target.where
                self._failed(state, PollError(f"{where}: {type(exc).__name__}: {exc}", False))
                return
            self.metrics.duration.observe(time.perf_counter() - t0)
            self._publish(state, ts_ns, samples, change, stats)

    async def _probe(self, state: _Target) -> None:
        """One try of one GETNEXT: does a down target answer again?"""
        assert self._probes is not None
        async with self._probes:
            await self._request(state, [SYS_NAME.oid], 0, probe=True)

    async def _collect(self, state: _Target
                       ) -> tuple[int, dec.Samples, Discontinuity, WalkStats]:
        """Walk (describing first if due), then decode against the description."""
        assert self._walks is not None
        every = self.config.describe_every_polls
        reason = "first" if state.description is None or not state.columns else \
            "stale" if every is not None and state.since_describe >= every else None
        async with self._walks:
            tables, stats = await self._walk(state, reason is not None)
            clocks = Clocks.of(tables)
            change = Discontinuity.between(state.clocks, clocks)
            if reason is None and change.redescribe:
                reason = "restart" if change.restarted else "table_change"
                tables, more = await self._walk(state, True)
                stats, clocks = stats + more, Clocks.of(tables)
        ts_ns = time.time_ns()
        if reason is not None:
            self.metrics.describes.labels(reason).inc()
            state.description = dec.describe(tables, state.target.port_name,
                                             self.config.port_names_by_vendor)
            state.columns = state.description.columns_to_walk(tables)
            state.since_describe = 0
            for why, n in state.description.sensors.unmapped.items():  # sensors left out
                self.metrics.skipped.labels(f"sensor_{why}").inc(n)
        assert state.description is not None
        samples = dec.decode_samples(state.target.device, tables, state.description,
                                     self.config.pfc_fallback_priority)
        state.since_describe += 1
        state.clocks = clocks
        return ts_ns, samples, change, stats

    async def _walk(self, state: _Target, describe: bool
                    ) -> tuple[dict[Oid, dict[Oid, int | bytes]], WalkStats]:
        """One walk of the description and values (``describe``) or of the values only."""
        t, c = state.target, self.config
        columns = dec.STATIC_COLUMNS + dec.DYNAMIC_COLUMNS if describe else state.columns
        scalars = dec.DESCRIBE_SCALARS if describe else dec.SCALARS
        limits = WalkLimits(t.max_repetitions or c.max_repetitions,
                            t.max_varbinds_per_request or c.max_varbinds_per_request,
                            c.max_rows_per_column, t.getnext)

        async def request(oids: list[Oid], non_repeaters: int, reps: int, getnext: bool
                          ) -> list[dec.Row]:
            return await self._request(state, oids, reps, non_repeaters=non_repeaters,
                                       getnext=getnext)

        tables, stats = await walk(request, columns, scalars, limits, t.where)
        self.metrics.varbinds.inc(stats.varbinds_received)
        self.metrics.varbinds_requested.inc(stats.varbinds_requested)
        self.metrics.requests.inc(stats.requests)
        return tables, replace(stats, described=describe)

    async def _request(self, state: _Target, oids: list[Oid], reps: int,
                       probe: bool = False, non_repeaters: int | None = None,
                       getnext: bool = False) -> list[dec.Row]:
        """One GETBULK (``reps`` 0: one GETNEXT per OID); PollError names what failed."""
        t = state.target
        client = self._v2c if t.credentials.version != "v3" else \
            self._usm if usm_supports(t) else self._v3
        assert client is not None
        nr = non_repeaters if non_repeaters is not None else 0 if reps else len(oids)
        return await client.bulk(t, oids, nr, reps, 1 if probe else t.retries + 1,
                                 getnext=getnext or t.getnext)

    def _publish(self, state: _Target, ts_ns: int, samples: dec.Samples,
                 change: Discontinuity, stats: WalkStats) -> None:
        """Carry counters on, hand the frame to the sink, record a good poll."""
        m = self.metrics
        assert state.description is not None
        names = state.description.names
        device = state.target.device
        reset = frozenset(f"{device}:{names[i]}" for i in change.ports if i in names)
        counters = state.tracker.update(samples, change.restarted, reset)
        m.wraps.inc(counters.wraps)
        m.resets.inc(counters.resets)
        if samples.malformed:
            m.errors.labels("malformed_row").inc(samples.malformed)
        for why, n in samples.skip_reasons():
            m.skipped.labels(why).inc(n)
        error = ""
        if samples.entities:
            state.seq += 1
            frame = dec.build_frame(state.target.device, ts_ns, state.seq, samples,
                                    counters.values)
            try:
                self.sink.publish_frames([frame])
                m.samples.inc(frame.n_samples)
            except Exception as exc:  # the sink's failure, counted; the target is fine
                m.errors.labels("publish").inc()
                error = f"{state.target.where}: sink refused the frame: {exc}"
                self._warnings.warning("SNMP frames refused by the sink", "%s", error)
            m.lag.observe(max(0.0, (time.time_ns() - ts_ns) / 1e9))
        m.polls.labels("ok").inc()
        self._set_status(state, replace(state.status, up=True, polls=state.status.polls + 1,
                                        consecutive_failures=0, last_ok_ns=ts_ns,
                                        last_error=error, last_walk=stats))

    def _failed(self, state: _Target, exc: PollError) -> None:
        m = self.metrics
        m.polls.labels("timeout" if exc.timeout else "error").inc()
        if exc.timeout:
            m.timeouts.inc()
        else:
            m.errors.labels("poll").inc()
        s = state.status
        self._set_status(state, replace(s, up=False, polls=s.polls + 1, last_error=str(exc),
                                        consecutive_failures=s.consecutive_failures + 1))
        if not self._stopping:
            self._outage_of(state).failed(exc)

    def _outage_of(self, state: _Target) -> Outage:
        """The target's outage book, on the poller's loop clock (called on the loop)."""
        if state.outage is None:
            state.outage = Outage(log, state.target.where, asyncio.get_running_loop().time,
                                  self._outage_lines, state.target.device)
        return state.outage

    def _set_status(self, state: _Target, status: TargetStatus) -> None:
        state.status = status
        if status.up and state.outage is not None:
            state.outage.recovered()
        self.metrics.target_up.labels(status.device).set(1 if status.up else 0)


__all__ = ["PollError", "SnmpPoller", "SnmpPollerConfig", "SnmpTarget", "TargetStatus",
           "targets_from_inventory"]
