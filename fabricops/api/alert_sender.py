"""ReceiverSender: one receiver's outbox rows, delivered in order on a thread of its own.

A pass claims the due rows at the head of the receiver's queue and POSTs
each once, in order (``WebhookClient`` with one attempt: the backoff is the
outbox's, kept in the row). A 2xx marks the row delivered and the pass goes
on. A refusal (an answer that retrying will not change) marks it dead and
the pass goes on. Any other failure schedules the row's next attempt
(``backoff_s`` doubling per attempt up to ``max_backoff_s``, or the
receiver's Retry-After within the same bound), or marks it dead if it was
enqueued more than ``give_up_after_s`` ago; the pass ends there and the
rows not tried are handed back, due at once but behind the failed one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge

from fabricops.api.alert_config import AlertReceiver, AlertsConfig
from fabricops.remediation.webhook import WebhookClient, WebhookConfig, WebhookError
from fabricops.store.outbox import OutboxRow
from fabricops.store.store import Store, StoreError

log = logging.getLogger(__name__)

STORE_WARNING_INTERVAL_S: Final = 60.0
_MAX_DOUBLINGS: Final = 62


class AlertMetrics:
    """What moves through the outbox; ``receiver`` is the receiver's configured name."""

    def __init__(self, registry: CollectorRegistry, receivers: Sequence[str]) -> None:
        self.pending = Gauge("fabricops_alerts_outbox_pending",
                             "Alerts in the outbox not yet delivered nor given up",
                             registry=registry)
        self.enqueued = Counter("fabricops_alerts_enqueued",
                                "Alerts added to the outbox (repeats of a record excluded)",
                                registry=registry)
        self.rejected = Counter("fabricops_alerts_rejected",
                                "Bus records set aside because they did not decode",
                                registry=registry)
        self.delivered = Counter("fabricops_alerts_delivered", "Alerts a receiver accepted",
                                 ["receiver"], registry=registry)
        self.failed_attempts = Counter("fabricops_alerts_failed_attempts",
                                       "POSTs of an alert that failed", ["receiver"],
                                       registry=registry)
        self.dead = Counter("fabricops_alerts_dead", "Alerts given up (refused, or failing "
                            "past give_up_after_s)", ["receiver"], registry=registry)
        for name in receivers:
            for counter in (self.delivered, self.failed_attempts, self.dead):
                counter.labels(name)


def delivery_id(receiver: str, event_key: str) -> str:
    """The ``X-Fabricops-Delivery`` of a record sent to a receiver: the same on every
    attempt, across restarts, and if the record is enqueued again."""
    return hashlib.sha256(f"{receiver}\n{event_key}".encode()).hexdigest()[:32]


class ReceiverSender:
    """Delivers the outbox rows of ``receiver`` (see the module docstring).

    ``after_pass`` runs after every pass (outbox-wide upkeep); ``clock`` gives
    ns since the Unix epoch (the outbox's times are wall-clock times).
    """

    def __init__(self, receiver: AlertReceiver, config: AlertsConfig, store: Store,
                 metrics: AlertMetrics, *, after_pass: Callable[[], None] = lambda: None,
                 clock: Callable[[], int] = time.time_ns) -> None:
        self.receiver = receiver
        self.config = config
        self.store = store
        self.metrics = metrics
        self.client = WebhookClient(WebhookConfig(
            url=receiver.url, secret=receiver.secret, timeout_s=receiver.timeout_s,
            attempts=1))
        self.wake = threading.Event()
        self._after_pass = after_pass
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned_at = -STORE_WARNING_INTERVAL_S

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"alerts-{self.receiver.name}")
        self._thread.start()

    def stopping(self) -> None:
        """Ask the thread to stop after the POST in flight; ``stop`` waits for it."""
        self._stop.set()
        self.wake.set()

    def stop(self) -> None:
        """Finish the POST in flight (at most the receiver's ``timeout_s``), hand back
        the rest of the claim, stop."""
        self.stopping()
        if self._thread is not None:
            self._thread.join(timeout=self.receiver.timeout_s + 5.0)
            self._thread = None

    def deliver_due(self) -> bool:
        """One pass; True if a whole batch went through (more may be due now)."""
        cfg = self.config
        rows = self.store.due_alerts(self.receiver.name, now_ns=self._clock(),
                                     lease_s=cfg.lease_s, limit=cfg.batch_rows)
        for i, row in enumerate(rows):
            if self._stop.is_set():
                self._hand_back(rows[i:])
                return False
            if not self._attempt(row):
                self._hand_back(rows[i + 1:])
                return False
        return len(rows) == cfg.batch_rows

    def _run(self) -> None:
        while not self._stop.is_set():
            self.wake.clear()
            more = False
            try:
                more = self.deliver_due()
                self._after_pass()
            except StoreError as exc:
                self._warn(exc)
            except Exception:
                log.exception("alerts: receiver %s: pass failed; retrying", self.receiver.name)
            if not more:
                self.wake.wait(self.config.poll_interval_s)

    def _attempt(self, row: OutboxRow) -> bool:
        """POST ``row`` once and settle it; whether the pass goes on."""
        name = self.receiver.name
        try:
            payload = json.loads(row.body)
        except ValueError as exc:
            self._dead(row, self._clock(), f"the stored body is not JSON: {exc}")
            return True
        try:
            self.client.post(row.event, payload, delivery_id=delivery_id(name, row.event_key),
                             attempts=1)
        except WebhookError as exc:
            return self._failed(row, exc)
        self.store.mark_alert_delivered(row.id, now_ns=self._clock())
        self.metrics.delivered.labels(name).inc()
        return True

    def _failed(self, row: OutboxRow, exc: WebhookError) -> bool:
        cfg = self.config
        self.metrics.failed_attempts.labels(self.receiver.name).inc()
        now = self._clock()
        tries = row.attempts + 1
        if not exc.retryable:
            self._dead(row, now, f"refused on attempt {tries}: {exc}")
            return True
        age_s = (now - row.created_ns) / 1e9
        if age_s >= cfg.give_up_after_s:
            self._dead(row, now, f"still failing {age_s:.0f} s after it was enqueued "
                                 f"({tries} attempts; give_up_after_s {cfg.give_up_after_s:g})"
                                 f": {exc}")
            return False
        delay_s = min(cfg.max_backoff_s,
                      cfg.backoff_s * 2.0 ** min(tries - 1, _MAX_DOUBLINGS))
        if exc.retry_after_s is not None:
            delay_s = min(cfg.max_backoff_s, max(delay_s, exc.retry_after_s))
        self.store.retry_alert(row.id, next_attempt_ns=now + round(delay_s * 1e9),
                               error=str(exc))
        log.debug("alerts: %s to %s failed (attempt %d), next in %.1f s: %s", row.event_key,
                  self.receiver.name, tries, delay_s, exc)
        return False

    def _dead(self, row: OutboxRow, now_ns: int, cause: str) -> None:
        self.store.mark_alert_dead(row.id, now_ns=now_ns, error=cause)
        self.metrics.dead.labels(self.receiver.name).inc()
        log.error("alerts: %s to receiver %s given up (outbox row %d): %s", row.event_key,
                  self.receiver.name, row.id, cause)

    def _hand_back(self, rows: Sequence[OutboxRow]) -> None:
        if rows:
            self.store.release_alerts([r.id for r in rows], now_ns=self._clock())

    def _warn(self, exc: StoreError) -> None:
        """Log a store failure at most once a minute (the store counts every one)."""
        now = time.monotonic()
        if now - self._warned_at >= STORE_WARNING_INTERVAL_S:
            self._warned_at = now
            log.warning("alerts: receiver %s: outbox unavailable, retrying: %s",
                        self.receiver.name, exc)
