"""Log lines operators can live with: one line per reason per interval, with the count.

``ThrottledLog.warning(reason, msg, *args)`` logs the first occurrence of
``reason`` at once; later ones within ``interval_s`` are only counted, and the
next line logged for that reason says how many were held back
(``"... (and 1,436 more like it in the last 30 s)"``). ``flush`` writes the
held-back counts out (call it when the loop stops).

``Outage`` turns a stream of failures into two lines: one when the outage
starts, one when it ends, with its length and what happened meanwhile.

``OutageLines`` keeps the outage lines of many targets readable when hundreds
go down or come back together (a pod losing power, a management network
split): a few lines as they come, then one line that counts the rest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class ThrottledLog:
    """Rate-limits log lines per reason (thread-safe)."""

    def __init__(self, log: logging.Logger, interval_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log = log
        self.interval_s = interval_s
        self.clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warning(self, reason: str, msg: str, *args: object) -> bool:
        return self.emit(logging.WARNING, reason, msg, *args)

    def error(self, reason: str, msg: str, *args: object) -> bool:
        return self.emit(logging.ERROR, reason, msg, *args)

    def emit(self, level: int, reason: str, msg: str, *args: object) -> bool:
        """Log ``msg % args`` unless ``reason`` was logged within the interval; True if logged."""
        now = self.clock()
        with self._lock:
            last = self._last.get(reason)
            if last is not None and now - last < self.interval_s:
                self._held[reason] = self._held.get(reason, 0) + 1
                return False
            held = self._held.pop(reason, 0)
            self._last[reason] = now
        if held:
            msg = f"{msg} (and {held:,} more like it in the last {self.interval_s:g} s)"
        self.log.log(level, msg, *args)
        return True

    def flush(self) -> None:
        """Log one line per reason with occurrences still held back."""
        with self._lock:
            held, self._held = self._held, {}
        for reason, n in sorted(held.items()):
            self.log.warning("%s: %s more held back", reason, f"{n:,}")


class Outage:
    """Tracks one dependency's outage and logs its start and its end, once each.

    ``failed(cause)`` on every failure, ``recovered(detail)`` on every
    success; only the transitions are logged. ``down_s`` is the length of the
    outage in progress (0 when up).
    """

    def __init__(self, log: logging.Logger, what: str,
                 clock: Callable[[], float] = time.monotonic,
                 lines: OutageLines | None = None, name: str = "") -> None:
        self.log = log
        self.what = what
        self.clock = clock
        self.lines = lines
        self.name = name or what
        self.since: float | None = None
        self.failures = 0
        self.outages = 0

    @property
    def down(self) -> bool:
        return self.since is not None

    @property
    def down_s(self) -> float:
        return 0.0 if self.since is None else self.clock() - self.since

    def failed(self, cause: object) -> bool:
        """Count a failure; True (and one warning) if it starts an outage."""
        self.failures += 1
        if self.since is not None:
            return False
        self.since = self.clock()
        self.outages += 1
        self._say("unavailable", "%s unavailable: %s", self.what, cause)
        return True

    def recovered(self, detail: str = "") -> float | None:
        """End an outage in progress; its length in seconds (and one line), else None."""
        if self.since is None:
            return None
        length = self.clock() - self.since
        self.since = None
        failures, self.failures = self.failures, 0
        extra = f"; {detail}" if detail else ""
        self._say("back", "%s back after %.1f s (%s failed attempts)%s", self.what, length,
                  f"{failures:,}", extra)
        return length

    def _say(self, kind: str, msg: str, *args: object) -> None:
        if self.lines is None:
            self.log.warning(msg, *args)
        else:
            self.lines.say(kind, self.name, msg, *args)


class Cancellable(Protocol):
    def cancel(self) -> None: ...


def _timer(delay_s: float, then: Callable[[], None]) -> Cancellable:
    timer = threading.Timer(delay_s, then)
    timer.daemon = True
    timer.start()
    return timer


@dataclass
class _Burst:
    """One kind of line in the interval that started at ``since``."""

    since: float
    said: int = 0
    held: int = 0
    names: list[str] = field(default_factory=list)
    summary: Cancellable | None = None


class OutageLines:
    """Outage lines of many targets of one kind (thread-safe).

    ``say(kind, name, msg, *args)`` logs the first ``burst`` lines of ``kind``
    ("unavailable", "back") in each ``interval_s`` as they come; the rest are
    held and summed up in one line when the interval ends (``schedule`` runs
    that later, on a timer thread by default): "SNMP targets: 1,019 more
    unavailable in the last 10 s (leaf-7, leaf-9, spine-3 and 1,016 more)". ``flush``
    writes what is held at once (call it when the collector stops).
    """

    EXAMPLES = 3

    def __init__(self, log: logging.Logger, what: str, interval_s: float = 10.0,
                 burst: int = 5, clock: Callable[[], float] = time.monotonic,
                 schedule: Callable[[float, Callable[[], None]], Cancellable] = _timer) -> None:
        self.log = log
        self.what = what
        self.interval_s = interval_s
        self.burst = burst
        self.clock = clock
        self.schedule = schedule
        self._lock = threading.Lock()
        self._bursts: dict[str, _Burst] = {}

    def say(self, kind: str, name: str, msg: str, *args: object) -> bool:
        """Log ``msg % args`` now, or hold it for the summary; True if logged."""
        now = self.clock()
        with self._lock:
            burst = self._bursts.get(kind)
            if burst is None or now - burst.since >= self.interval_s:
                if burst is not None and burst.held:
                    self._summarize(kind, burst)
                burst = self._bursts[kind] = _Burst(now)
            if burst.said >= self.burst:
                burst.held += 1
                if len(burst.names) < self.EXAMPLES:
                    burst.names.append(name)
                if burst.summary is None:
                    wait_s = burst.since + self.interval_s - now
                    burst.summary = self.schedule(wait_s, lambda: self._summarize_now(kind))
                return False
            burst.said += 1
        self.log.warning(msg, *args)
        return True

    def flush(self) -> None:
        """Sum up every held line now."""
        with self._lock:
            for kind, burst in self._bursts.items():
                if burst.held:
                    self._summarize(kind, burst)
            self._bursts.clear()

    def _summarize_now(self, kind: str) -> None:
        with self._lock:
            burst = self._bursts.get(kind)
            if burst is not None and burst.held:
                self._summarize(kind, burst)

    def _summarize(self, kind: str, burst: _Burst) -> None:
        """One line for what ``burst`` held, which it then forgets (lock held)."""
        if burst.summary is not None:
            burst.summary.cancel()
        more = f"{burst.held - len(burst.names):,} more" if burst.held > len(burst.names) else ""
        examples = ", ".join(burst.names) + (f" and {more}" if more else "")
        self.log.warning("%s: %s more %s in the last %g s (%s)", self.what, f"{burst.held:,}",
                         kind, self.interval_s, examples)
        burst.held, burst.names, burst.summary = 0, [], None
