"""The gNMI subscriber collector: one STREAM / SAMPLE subscription per target.

Each target's subscription runs as a task on the collector's own thread and
event loop (grpc.aio). Every notification becomes a Frame
(:mod:`fabricops.collectors.gnmi_mapping`); the notifications of one instant
(one timestamp, or within the target's ``join_within_s``) go to the sink as
one frame, on that loop, at most ``join_hold_s`` after the first of them (only
a target seen to split its instants is held: :mod:`.gnmi_instant`), so the
sink must not block for long. When a subscription fails (target unreachable,
refused, stream dropped, no first answer within ``connect_timeout_s``, or
silent for the stall timeout) the target is marked down with the error in its
status and the collector resubscribes on a fresh channel for ever
(``keep_subscribed``), after a backoff that doubles from
``backoff_initial_s`` per failure in a row, is jittered, and never passes
``backoff_max_s`` (at most 5 s: a device back from an outage of any length is
subscribed again within that, and streams once it answers). A target's outage
is logged once when it starts, with the cause, and once when it ends, with its
length; notifications skipped and frames the sink refuses are counted and logged
at most once per cause every 30 s, with their count. ``apply_policy`` changes a
target's sample interval and resubscribes it at once.

A target is up while its subscription answers and its leaves map to metrics
with its dialect profile: one whose leaves all fail to map is down, with the
reason in its status (:class:`fabricops.collectors.gnmi_explain.TargetBook`).
``sync_response`` marks the initial state complete (``synced``). ``explain()``
says per target what its leaves became (``fabricops collect --explain``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import grpc
from prometheus_client import CollectorRegistry
from pygnmi.spec.v080 import gnmi_pb2_grpc

from fabricops.collectors.gnmi_config import (
    GnmiCollectorConfig,
    GnmiEndpoint,
    PolicyBook,
    call_metadata,
    open_channel,
    subscribe_request,
)
from fabricops.collectors.gnmi_explain import TargetBook, TargetExplain
from fabricops.collectors.gnmi_instant import HeldInstant
from fabricops.collectors.gnmi_mapping import NotificationMapper
from fabricops.collectors.gnmi_metrics import GnmiMetrics
from fabricops.collectors.gnmi_resubscribe import Attempt, failure_kind, keep_subscribed
from fabricops.collectors.gnmi_tls import ServerCertificate, fetch_server_certificate
from fabricops.collectors.grpc_loop import quiet_grpc_noise
from fabricops.core.frame_join import join_frames
from fabricops.core.logthrottle import Outage, OutageLines, ThrottledLog
from fabricops.core.records import SamplingPolicy
from fabricops.core.sinks import FrameSink

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GnmiTargetStatus:
    """A target's health as the collector sees it; ``last_error`` names the cause."""

    device: str
    address: str
    up: bool
    interval_s: float
    last_error: str | None
    reconnects: int
    frames: int
    samples: int
    last_sample_ns: int | None
    profile: str = "openconfig"
    synced: bool = False
    leaves: int = 0
    mapped: int = 0


class _SubscriptionFailedError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Run:
    """The mutable state of one target's subscription (touched on the loop thread only)."""

    def __init__(self, endpoint: GnmiEndpoint, unhealthy_after_leaves: int,
                 lines: OutageLines) -> None:
        self.endpoint = endpoint
        self.mapper = NotificationMapper(endpoint.device, endpoint.profile)
        self.book = TargetBook(endpoint.device, endpoint.profile, unhealthy_after_leaves)
        self.interval_s = endpoint.sample_interval_s
        self.call: Any = None
        self.resubscribe = False
        self.up = self.answering = self.synced = False
        self.last_error: str | None = None
        self.reconnects = self.frames = self.samples = self.seq = 0
        self.last_sample_ns: int | None = None
        self.held = HeldInstant()
        self.outage = Outage(log, f"gNMI target {endpoint.device} at {endpoint.address}",
                             lines=lines, name=endpoint.device)


class GnmiCollector:
    """Subscribes to every target of ``config`` and publishes their frames to ``sink``.

    ``rng`` draws the backoff's jitter (seed it in tests).
    """

    def __init__(self, config: GnmiCollectorConfig, sink: FrameSink,
                 registry: CollectorRegistry | None = None,
                 rng: random.Random | None = None) -> None:
        self.config = config
        self.sink = sink
        self.registry = registry if registry is not None else CollectorRegistry()
        self._metrics = GnmiMetrics(self.registry)
        self._rng = rng or random.Random()
        self._backoff = config.backoff
        self._warnings = ThrottledLog(log)
        self._outage_lines = OutageLines(log, "gNMI targets")
        self._runs = {t.device: _Run(t, config.unhealthy_after_leaves, self._outage_lines)
                      for t in config.targets}
        self._metrics.prepare(list(self._runs))
        self._policies = PolicyBook()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._closing = False
        self._expiry: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Subscribe to every target on a new thread; returns at once."""
        ready = threading.Event()
        self._closing = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, args=(ready,),
                                        name="gnmi-collector", daemon=True)
        self._thread.start()
        ready.wait()

    def stop(self) -> None:
        """Cancel every subscription and close their channels."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and self._thread is not None:
            loop.call_soon_threadsafe(stopped.set)
            self._thread.join(timeout=10)
        self._loop = self._thread = self._stopped = None
        self._warnings.flush()
        self._outage_lines.flush()

    def status(self) -> dict[str, GnmiTargetStatus]:
        return {d: GnmiTargetStatus(d, r.endpoint.address, r.up, r.interval_s, r.last_error,
                                    r.reconnects, r.frames, r.samples, r.last_sample_ns,
                                    r.endpoint.profile, r.synced, r.book.leaves, r.book.mapped)
                for d, r in self._runs.items()}

    def explain(self) -> list[TargetExplain]:
        """Per target: profile, leaves received, mapped, unsupported, unmapped paths."""
        return [r.book.explain() for r in self._runs.values()]

    def apply_policy(self, policy: SamplingPolicy) -> None:
        """Follow a sampling policy (see ``PolicyBook``); changed targets resubscribe at once."""
        if not self._policies.offer(policy):
            return
        loop = self._loop
        try:
            if loop is not None:
                loop.call_soon_threadsafe(self._follow_policies)
                return
        except RuntimeError:  # the loop closed under us: held for the next start
            return
        self._follow_policies()

    def _follow_policies(self) -> None:
        """Resubscribe targets whose interval changed; come back at the next expiry."""
        now = time.time_ns()
        for run in self._runs.values():
            interval = self._policies.interval_s(run.endpoint.device,
                                                 run.endpoint.sample_interval_s, now)
            if interval != run.interval_s:
                run.interval_s = interval
                self._metrics.interval.labels(run.endpoint.device).set(interval)
                run.resubscribe = True
                if run.call is not None:
                    run.call.cancel()
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        expiry = self._policies.next_expiry_ns(now)
        if expiry is not None and self._loop is not None:
            self._expiry = self._loop.call_later((expiry - now) / 1e9 + 0.001,
                                                 self._follow_policies)

    def _run_loop(self, ready: threading.Event) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        self._loop.set_exception_handler(quiet_grpc_noise)
        try:
            self._loop.run_until_complete(self._main(ready))
        finally:
            self._loop.close()

    async def _main(self, ready: threading.Event) -> None:
        self._stopped = asyncio.Event()
        self._follow_policies()
        for run in self._runs.values():
            self._metrics.interval.labels(run.endpoint.device).set(run.interval_s)
            self._metrics.up.labels(run.endpoint.device).set(0)
        tasks = [asyncio.create_task(self._follow(run)) for run in self._runs.values()]
        ready.set()
        await self._stopped.wait()
        self._closing = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for run in self._runs.values():
            self._mark(run, up=False)

    async def _follow(self, run: _Run) -> None:
        """Keep ``run`` subscribed until cancelled."""
        await keep_subscribed(lambda: self._subscription(run), self._backoff, self._rng,
                              closing=lambda: self._closing, on_retry=lambda: self._retry(run))

    def _retry(self, run: _Run) -> None:
        run.reconnects += 1
        self._metrics.reconnects.labels(run.endpoint.device).inc()

    async def _subscription(self, run: _Run) -> Attempt:
        """Run one subscription until it fails or is asked to resubscribe."""
        delivered, run.resubscribe = False, False
        ep = run.endpoint
        run.book.subscribed()
        self._synced(run, False)
        try:
            server: ServerCertificate | None = None
            if ep.skip_verify and not ep.insecure:
                server = await asyncio.get_running_loop().run_in_executor(
                    None, fetch_server_certificate, ep)
            channel = open_channel(ep, self.config.max_message_bytes, server)
        except OSError as exc:
            self._fail(run, "config", f"{ep.device}: {exc}")
            return Attempt.FAILED
        try:
            call = gnmi_pb2_grpc.gNMIStub(channel).Subscribe(metadata=call_metadata(ep),
                                                             wait_for_ready=False)
            run.call = call
            timeout = self.config.connect_timeout_s
            await self._timed(run, call.write(subscribe_request(ep, run.interval_s)), timeout)
            while not self._closing:
                response = await self._read(run, call, timeout)
                delivered = True
                timeout = self.config.stall_after_s(run.interval_s)
                self._on_response(run, response)
        except _SubscriptionFailedError as exc:
            self._fail(run, exc.kind, str(exc))
        except grpc.aio.AioRpcError as exc:
            if not run.resubscribe:
                self._fail(run, failure_kind(exc, delivered), f"{ep.device} at {ep.address}: "
                           f"{exc.code().name}: {exc.details()}")
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not run.resubscribe or (current is not None and current.cancelling()):
                raise
        except Exception as exc:  # never ends the target's loop; counted and shown
            self._fail(run, "internal", f"{ep.device} at {ep.address}: {exc!r}")
        finally:
            run.call = None
            self._publish(run)
            await channel.close()
        if run.resubscribe:
            return Attempt.RESUBSCRIBE
        return Attempt.DROPPED if delivered else Attempt.FAILED

    async def _read(self, run: _Run, call: Any, timeout_s: float) -> Any:
        response = await self._timed(run, call.read(), timeout_s)
        ep = run.endpoint
        if response is grpc.aio.EOF:
            raise _SubscriptionFailedError(
                "stream", f"{ep.device} at {ep.address}: the target ended the stream")
        if response is None:  # grpc could not deserialize it (and ends the call)
            raise _SubscriptionFailedError(
                "bad_message", f"{ep.device} at {ep.address}: a message is no "
                "SubscribeResponse (truncated or garbage)")
        return response

    async def _timed(self, run: _Run, step: Awaitable[Any], timeout_s: float) -> Any:
        """Await ``step``; a timeout fails the subscription, naming the target."""
        try:
            async with asyncio.timeout(timeout_s):
                return await step
        except TimeoutError:
            ep = run.endpoint
            raise _SubscriptionFailedError(
                "timeout", f"{ep.device} at {ep.address}: no answer within {timeout_s:g} s"
            ) from None

    def _on_response(self, run: _Run, response: Any) -> None:
        device = run.endpoint.device
        self._mark(run, up=True)
        if response.HasField("error"):
            self._metrics.errors.labels(device, "target_error").inc()
            return
        if response.sync_response:
            self._publish(run)
            self._synced(run, True)
            return
        if not response.HasField("update"):
            return
        received = time.time_ns()
        m = self._metrics
        try:
            mapped = run.mapper.map(response.update, run.seq, received)
        except Exception as exc:  # a notification that cannot make a frame is skipped
            m.errors.labels(device, "bad_notification").inc()
            run.last_error = f"{device}: notification skipped: {exc}"
            self._warnings.warning(f"gNMI {device}: notifications skipped", "%s", run.last_error)
            return
        m.observe_leaves(device, mapped, mapped.updates)
        for kind, n in mapped.errors.items():
            m.errors.labels(device, kind).inc(n)
        if mapped.gone:
            m.gone.labels(device).inc(len(mapped.gone))
        run.book.record(mapped)
        self._mark(run, up=True)
        if mapped.frame is None:
            return
        held = run.held
        within_ns = round(min(run.endpoint.join_within_s, run.interval_s / 4) * 1e9)
        if not held.belongs(mapped.frame, within_ns):
            self._publish(run)
        first = held.add(mapped.frame, received, within_ns)
        if not held.waits:
            self._publish(run)
        elif first:
            hold_s = min(self.config.join_hold_s, run.interval_s / 2)
            held.timer = asyncio.get_running_loop().call_later(hold_s, self._publish, run)

    def _publish(self, run: _Run) -> None:
        """Send the target's held instant as one frame (nothing held: nothing sent)."""
        parts = run.held.take()
        if not parts:
            return
        device, m = run.endpoint.device, self._metrics
        try:
            frame, repeats = join_frames(parts, seq=run.seq)
            self.sink.publish_frames([frame])
        except Exception as exc:  # a failing sink is counted, never ends the subscription
            m.errors.labels(device, "sink").inc()
            run.last_error = f"{device}: sink refused a frame: {exc}"
            self._warnings.warning("gNMI frames refused by the sink", "%s", run.last_error)
            return
        if len(parts) > 1:
            m.joined.labels(device).inc(len(parts) - 1)
        if repeats:
            m.repeats.labels(device).inc(repeats)
        run.seq += 1
        run.frames += 1
        run.samples += frame.n_samples
        run.last_sample_ns = frame.ts_ns
        m.observe_frame(device, frame, (time.time_ns() - run.held.received_ns) / 1e9)

    def _mark(self, run: _Run, *, up: bool) -> None:
        """``up``: the target answers; it is up if its leaves also map (else the reason
        is its error, counted once as ``unmapped_only``)."""
        run.answering = up
        reason = run.book.reason if up else None
        healthy = up and reason is None
        if run.up != healthy:
            run.up = healthy
            self._metrics.up.labels(run.endpoint.device).set(int(healthy))
            if reason is not None:
                self._metrics.errors.labels(run.endpoint.device, "unmapped_only").inc()
                run.outage.failed(reason)
        if reason is not None:
            run.last_error = reason
        elif healthy:
            run.last_error = None
            run.outage.recovered()

    def _synced(self, run: _Run, synced: bool) -> None:
        run.synced = synced
        self._metrics.synced.labels(run.endpoint.device).set(int(synced))

    def _fail(self, run: _Run, kind: str, message: str) -> None:
        self._mark(run, up=False)
        if not self._closing:
            run.outage.failed(message)
        run.last_error = message
        self._metrics.errors.labels(run.endpoint.device, kind).inc()
