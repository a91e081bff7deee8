"""The one consumer loop every bus consumer runs: it never ends silently.

``ConsumerLoop.run(stop)`` polls a batch, hands it to ``handle``, commits, and
goes on until ``stop`` is set. What can go wrong, and what it does:

- **A record the handler cannot take** (the handler raises anything that is
  not transient): ``recover`` is called (the handler drops state the failed
  call may have half changed), the batch is handled again one record at a
  time, and each record that still fails goes to the dead-letter topic
  (``handler_error``) with the exception; then the batch is committed and the
  loop goes on. Handlers that recognise a bad record themselves put it in the
  same ``DeadLetterBox`` with a precise reason.
- **The bus goes away** (``BusError``): the consumer is closed and the group
  joined again; records polled but not committed are delivered again.
- **A transient failure** (an exception with a true ``transient`` attribute,
  e.g. the store's database is restarting): the same batch is handled again
  after ``recover``, nothing is skipped.
- **The group moves partitions** (a member joined, left or died): when this
  member gains partitions, ``recover`` is called before the next batch,
  so a handler that keeps state per key (the pipeline's open windows) starts
  the partitions it takes over from what their previous owner made durable,
  never from an older copy of its own.
- **A handler that holds records** (the pipeline's open windows live only in
  memory until they close): ``hold`` names, per partition, the first offset
  still needed, and the commit stops there, so after a restart or a
  rebalance the records of what was not yet durable are delivered again.
  ``assigned`` hears of every change of the partitions owned (so the handler
  drops what it holds of partitions another member now owns), and ``drain``
  is called when the loop is stopped, before the last commit and before the
  member leaves the group (the handler makes everything it holds durable).
  ``idle`` is called when a poll brings nothing (the handler may write what
  it holds of sources gone silent). ``caught_up`` hears after each poll which
  owned partitions the member has read to their end (a handler behind the
  stream waits only for the others).
- **A rebalance that does not finish** (the member has waited ``rejoin_after_s``
  for its group to settle, longer than the brokers wait for a member slow to
  rejoin; a broker that lost track of a member can make it last for ever): a
  ``BusError`` as above, so the member leaves, joins again under a new
  identity, the outage is logged and counted, and the loop gives up like any
  other outage. An outage ends only once the member's group has settled, not
  at the first poll that answers. ``fabricops_consumer_joining_seconds`` shows
  the wait while it lasts.
- Between retries the loop waits a backoff that doubles from ``backoff_s`` up
  to ``max_backoff_s``, with jitter. An outage is logged once when it starts
  and once when it ends. If the loop has not completed a batch for
  ``give_up_after_s``, it gives up: the worker is reported dead in
  ``Liveness`` (``/ready`` names it, the command exits non-zero) and ``run``
  returns.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.bus import Bus, BusError, Consumer, Message
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.liveness import Liveness
from fabricops.core.logthrottle import Outage
from fabricops.core.registry import shared_counter, shared_gauge

Handler = Callable[[list[Message]], object]


class ConsumerLoopConfig(BaseModel):
    """How a consumer loop polls, retries and gives up."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    poll_timeout_s: float = Field(default=0.5, gt=0)
    max_records: int = Field(default=500, ge=1)
    backoff_s: float = Field(default=0.5, gt=0, description="First wait before a retry")
    max_backoff_s: float = Field(default=5.0, gt=0, le=60, description="Longest wait")
    give_up_after_s: float = Field(
        default=300.0, gt=0, description="No batch done for this long: the worker is dead")
    rejoin_after_s: float = Field(
        default=330.0, gt=0, description="Waiting this long for the group to finish a "
        "rebalance: leave and join again (longer than a healthy rebalance can last: the "
        "Kafka bus's max_poll_interval_ms and a session, 310 s by default)")


def is_transient(exc: BaseException) -> bool:
    """True for failures that waiting cures (a bus or database away), not bad records."""
    return isinstance(exc, BusError) or bool(getattr(exc, "transient", False))


class ConsumerLoop:
    """One group member's loop (see the module docstring)."""

    def __init__(self, config: ConsumerLoopConfig, bus: Bus, topics: Sequence[str],
                 group: str, handle: Handler, *, name: str,
                 dead_letters: DeadLetterBox | None = None,
                 liveness: Liveness | None = None,
                 recover: Callable[[], object] | None = None,
                 hold: Callable[[], Mapping[tuple[str, int], int]] | None = None,
                 assigned: Callable[[set[tuple[str, int]]], object] | None = None,
                 drain: Callable[[], object] | None = None,
                 idle: Callable[[], object] | None = None,
                 caught_up: Callable[[set[tuple[str, int]]], object] | None = None,
                 registry: CollectorRegistry | None = None,
                 log: logging.Logger | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.config, self.bus, self.topics, self.group = config, bus, list(topics), group
        self.handle, self.name, self.recover, self.hold = handle, name, recover, hold
        self.assigned, self.drain, self.idle = assigned, drain, idle
        self.caught_up = caught_up
        reg = registry if registry is not None else CollectorRegistry()
        self.dead_letters = dead_letters or DeadLetterBox(bus, group, registry=reg)
        self.liveness = liveness
        self.log = log or logging.getLogger(__name__)
        self.clock = clock
        self._rng = rng or random.Random()
        self.m_records = shared_counter(reg, "fabricops_consumer_records",
                                        "Records a consumer loop handled", ["worker"])
        self.m_failures = shared_counter(
            reg, "fabricops_consumer_failures",
            "Failed attempts of a consumer loop, by reason (bus, transient, loop)",
            ["worker", "reason"])
        self.m_joining = shared_gauge(
            reg, "fabricops_consumer_joining_seconds",
            "How long a consumer loop's member has waited for its group to finish a "
            "rebalance (0: settled)", ["worker"])
        self.m_records.labels(name)
        self._member: Consumer | None = None  # the group member now polled, for the gauge
        self.m_joining.labels(name).set_function(self._joining_s)
        for reason in ("bus", "transient", "loop"):
            self.m_failures.labels(name, reason)
        self._outage = Outage(self.log, f"{name}: bus or store", clock)

    def run(self, stop: threading.Event, consumer: Consumer | None = None) -> None:
        """Loop until ``stop`` is set or the loop gives up (see the module docstring)."""
        if self.liveness is not None:
            self.liveness.alive(self.name)
        try:
            self._loop(stop, consumer)
        except Exception as exc:  # a defect of the loop itself: say so, never vanish
            self.log.exception("%s: consumer loop failed", self.name)
            self._give_up(f"{type(exc).__name__}: {exc}")

    def _loop(self, stop: threading.Event, consumer: Consumer | None) -> None:
        pending: list[Message] = []
        attempt = 0
        stale = False  # the handler's state must be rebuilt before the next attempt
        owned: set[tuple[str, int]] | None = None
        self._member = consumer
        while not stop.is_set():
            try:
                if stale:
                    self._recover()
                    stale = False
                if consumer is None:
                    consumer = self.bus.subscribe(self.topics, self.group)
                    self._member = consumer
                if not pending:
                    pending = consumer.poll(self.config.poll_timeout_s, self.config.max_records)
                    self._check_join(consumer)
                    now_owned = consumer.assignment()
                    if now_owned != owned and self.assigned is not None:
                        self.assigned(now_owned)
                    if now_owned - (owned or set()):
                        self._recover()  # partitions gained: their state is in the store
                    owned = now_owned
                    if self.caught_up is not None:
                        self.caught_up(consumer.caught_up())
                if pending:
                    stale = True  # until the batch is done
                    self._handle_batch(pending)
                    stale = False
                elif self.idle is not None:
                    self.idle()
                consumer.commit(self.hold() if self.hold is not None else None)
            except Exception as exc:
                if isinstance(exc, BusError):
                    kind = "bus"
                    _close_quietly(consumer)
                    consumer, pending, owned, self._member = None, [], None, None
                else:
                    kind = "transient" if is_transient(exc) else "loop"
                self.m_failures.labels(self.name, kind).inc()
                self._outage.failed(f"{type(exc).__name__}: {exc}")
                if self._outage.down_s >= self.config.give_up_after_s:
                    self._give_up(f"no batch done for {self._outage.down_s:.0f} s; last "
                                  f"error: {exc}")
                    break
                stop.wait(self._backoff(attempt))
                attempt += 1
                continue
            self.m_records.labels(self.name).inc(len(pending))
            pending, attempt = [], 0
            if consumer is not None and not consumer.joining_s():
                self._outage.recovered()  # back only once the group has settled
        if stop.is_set():
            self._drain(consumer)
        _close_quietly(consumer)
        self._member = None

    def _check_join(self, consumer: Consumer) -> None:
        """BusError once the member has waited ``rejoin_after_s`` for a rebalance."""
        waited = consumer.joining_s()
        if waited >= self.config.rejoin_after_s:
            raise BusError(f"group {self.group!r} on {self.topics}: a rebalance has not "
                           f"finished after {waited:.0f} s; joining again as a new member")

    def _joining_s(self) -> float:
        """The wait of the member now polled (read at each scrape, also mid-poll)."""
        member = self._member
        return 0.0 if member is None else member.joining_s()

    def _drain(self, consumer: Consumer | None) -> None:
        """Stopped: let the handler make what it holds durable, then commit it."""
        if consumer is None or self.drain is None:
            return
        try:
            self.drain()
            consumer.commit(self.hold() if self.hold is not None else None)
        except Exception as exc:  # what is not committed is delivered again
            self.log.warning("%s: stopping, not everything held was made durable (it is "
                             "delivered again): %s", self.name, exc)

    def _handle_batch(self, batch: list[Message]) -> None:
        """``handle(batch)``; on a record failure, one record at a time, dead-lettering."""
        try:
            self.handle(batch)
            return
        except Exception as exc:
            if is_transient(exc):
                raise
            first = exc
        self._recover()
        if len(batch) == 1:
            self._dead(batch[0], first)
            return
        for msg in batch:
            try:
                self.handle([msg])
            except Exception as exc:
                if is_transient(exc):
                    raise
                self._recover()
                self._dead(msg, exc)

    def _dead(self, msg: Message, exc: BaseException) -> None:
        self.dead_letters.put(msg, "handler_error", f"{type(exc).__name__}: {exc}")

    def _recover(self) -> None:
        if self.recover is not None:
            self.recover()

    def _backoff(self, attempt: int) -> float:
        """Doubling from ``backoff_s``, capped at ``max_backoff_s``, with +-20 % jitter."""
        base = min(self.config.backoff_s * 2.0 ** min(attempt, 30), self.config.max_backoff_s)
        return min(base * self._rng.uniform(0.8, 1.2), self.config.max_backoff_s)

    def _give_up(self, reason: str) -> None:
        self.log.error("%s: giving up: %s", self.name, reason)
        if self.liveness is not None:
            self.liveness.dead(self.name, reason)


class GroupConsumer:
    """A ``ConsumerLoop`` on a daemon thread named ``name``, between ``start`` and ``stop``."""

    def __init__(self, bus: Bus, topics: Sequence[str], group: str, handle: Handler, *,
                 name: str, log: logging.Logger,
                 config: ConsumerLoopConfig | None = None,
                 dead_letters: DeadLetterBox | None = None,
                 liveness: Liveness | None = None,
                 recover: Callable[[], object] | None = None,
                 idle: Callable[[], object] | None = None,
                 assigned: Callable[[set[tuple[str, int]]], object] | None = None,
                 caught_up: Callable[[set[tuple[str, int]]], object] | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        self.loop = ConsumerLoop(config or ConsumerLoopConfig(), bus, topics, group, handle,
                                 name=name, dead_letters=dead_letters, liveness=liveness,
                                 recover=recover, assigned=assigned, idle=idle,
                                 caught_up=caught_up, registry=registry, log=log)
        self.name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, consumer: Consumer | None = None) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self.loop.run, args=(self._stop, consumer),
                                        name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None
        if self.loop.liveness is not None:
            self.loop.liveness.forget(self.name)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


def _close_quietly(consumer: Consumer | None) -> None:
    if consumer is not None:
        with contextlib.suppress(Exception):
            consumer.close()
