"""AlertDispatcher: diagnoses and actions to the team's webhook receivers, durably.

Intake: a member of the ``fabricops-alerts`` consumer group on
``diagnoses.v2`` and ``actions.v2`` renders each record once per receiver
that wants it (:mod:`fabricops.api.alert_render`, formats in
:mod:`fabricops.api.alert_payloads`) and writes the bodies to the store's
webhook outbox in one transaction; the batch's offsets are committed after
that. A record the bus delivers again is not enqueued again (one row per
receiver and record). If the store cannot take the rows, the batch is not
committed: the consumer rejoins and the bus delivers it again.

Delivery: one :class:`~fabricops.api.alert_sender.ReceiverSender` thread per
receiver, so a receiver that is down or slow holds up no other. Each
receiver gets its alerts oldest first, in order, signed with its secret,
with an ``X-Fabricops-Delivery`` id stable per receiver and record (a
receiver drops repeats by it). Failures are retried with the outbox's
backoff; a refusal (4xx), or a row still failing ``give_up_after_s`` after
it was enqueued, is marked dead with the cause, counted and logged, and
stays in the outbox. The schedule lives in the store, so a restarted
dispatcher resumes where the last one stopped. Delivered rows are deleted
after ``retention_s``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Final

from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from fabricops.api.alert_config import (
    AlertEvents,
    AlertFormat,
    AlertReceiver,
    AlertsConfig,
    AlertsConfigError,
    load_alerts_config,
)
from fabricops.api.alert_render import AlertRenderer
from fabricops.api.alert_sender import AlertMetrics, ReceiverSender
from fabricops.core.actions import Action
from fabricops.core.bus import Bus, Message, Topic, topic_name
from fabricops.core.busio import GroupConsumer
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.liveness import Liveness
from fabricops.core.records import Diagnosis
from fabricops.store.store import Store, StoreError

log = logging.getLogger(__name__)

PRUNE_INTERVAL_S: Final = 3600.0

__all__ = ["AlertDispatcher", "AlertEvents", "AlertFormat", "AlertReceiver", "AlertsConfig",
           "AlertsConfigError", "OutboxUnavailableError", "load_alerts_config"]


class OutboxUnavailableError(RuntimeError):
    """The outbox could not take a batch's alerts; the batch stays uncommitted. When the
    database is away (``transient``) the consumer loop handles the batch again after a
    backoff; otherwise it sets the failing record aside on the dead-letter topic."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


class AlertDispatcher:
    """See the module docstring. ``store`` is started and stopped by the caller."""

    def __init__(self, config: AlertsConfig, bus: Bus, store: Store,
                 registry: CollectorRegistry | None = None,
                 liveness: Liveness | None = None) -> None:
        self.config = config
        self.bus = bus
        self.store = store
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = AlertMetrics(self.registry, [r.name for r in config.receivers])
        self.renderer = AlertRenderer(config, store)
        self.senders = {r.name: ReceiverSender(r, config, store, self.metrics,
                                               after_pass=self._upkeep)
                        for r in config.receivers}
        self._kinds: dict[str, type[Diagnosis] | type[Action]] = {
            topic_name(Topic.DIAGNOSES, config.prefix): Diagnosis,
            topic_name(Topic.ACTIONS, config.prefix): Action}
        self.dead_letters = DeadLetterBox(bus, config.group, prefix=config.prefix,
                                          registry=self.registry)
        self._consumer = GroupConsumer(bus, list(self._kinds), config.group, self.process,
                                       name="alerts", log=log, dead_letters=self.dead_letters,
                                       liveness=liveness, registry=self.registry)
        self._lock = threading.Lock()
        self._next_refresh_s = 0.0
        self._next_prune_s = 0.0
        self._running = False

    def start(self) -> None:
        """Resume the senders on what the outbox holds, then consume. Without a receiver
        nothing runs (and the group's offsets do not move)."""
        if self._running:
            return
        if not self.senders:
            log.info("alerts: no receiver configured; alerts are not sent")
            return
        self._report_orphans()
        for sender in self.senders.values():
            sender.start()
        self._consumer.start()
        self._running = True

    def stop(self) -> None:
        """Stop consuming (what was not enqueued stays uncommitted), then the senders
        (each finishes its POST in flight)."""
        self._consumer.stop()
        for sender in self.senders.values():
            sender.stopping()
        for sender in self.senders.values():
            sender.stop()
        self._running = False

    def process(self, messages: list[Message]) -> int:
        """Enqueue the alerts of a batch (the consumer's handler); returns rows added.

        A record that does not decode is set aside, counted and logged.
        OutboxUnavailableError if the store failed: nothing of the batch is enqueued.
        """
        try:
            entries = [e for m in messages
                       if (record := self._decode(m)) is not None
                       for e in self.renderer.entries(record)]
            added = self.store.enqueue_alerts(entries, now_ns=time.time_ns()) if entries else 0
        except StoreError as exc:
            raise OutboxUnavailableError(f"alerts of {len(messages)} records not enqueued: "
                                         f"{exc}", transient=exc.transient) from exc
        self.metrics.enqueued.inc(added)
        if added:
            for name in {e.receiver for e in entries}:
                self.senders[name].wake.set()
        return added

    def _decode(self, m: Message) -> Diagnosis | Action | None:
        kind = self._kinds.get(m.topic)
        if kind is None:
            return None
        try:
            return kind.decode(m.value)
        except (ValidationError, ValueError) as exc:
            self.metrics.rejected.inc()
            self.dead_letters.put(m, "undecodable", " ".join(str(exc).split())[:300])
            return None

    def _upkeep(self) -> None:
        """After a sender's pass, at most once per poll interval: refresh the pending
        gauge; once an hour, delete delivered rows older than ``retention_s``."""
        now = time.monotonic()
        with self._lock:
            if now < self._next_refresh_s:
                return
            self._next_refresh_s = now + self.config.poll_interval_s
            prune = now >= self._next_prune_s
            if prune:
                self._next_prune_s = now + PRUNE_INTERVAL_S
        self.metrics.pending.set(sum(self.store.pending_alerts().values()))
        if prune:
            cutoff = time.time_ns() - round(self.config.retention_s * 1e9)
            pruned = self.store.prune_alerts(before_ns=cutoff)
            if pruned:
                log.info("alerts: %d delivered alerts older than %g s deleted", pruned,
                         self.config.retention_s)

    def _report_orphans(self) -> None:
        """Warn about pending rows of receivers no longer configured (they stay)."""
        try:
            pending = self.store.pending_alerts()
        except StoreError as exc:
            log.warning("alerts: cannot read the outbox yet: %s", exc)
            return
        self.metrics.pending.set(sum(pending.values()))
        orphans = {name: n for name, n in sorted(pending.items()) if name not in self.senders}
        if orphans:
            log.warning("alerts: pending alerts of receivers no longer configured stay in "
                        "the outbox: %s", ", ".join(f"{k} ({v})" for k, v in orphans.items()))
