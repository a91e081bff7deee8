"""Log lines operators can live with: one line per reason per interval, with the count.

``ThrottledLog.warning(reason, msg, *args)`` logs the first occurrence of
``reason`` at once; later ones within ``interval_s`` are only counted, and the
next line logged for that reason says how many were held back
(``"... (and 1,436 more like it in the last 30 s)"``). ``flush`` writes the
held-back counts out (call it when the loop stops).

``Outage`` turns a stream of failures into two lines: one when the outage
starts, one when it ends, with its length and what happened meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable


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
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log = log
        self.what = what
        self.clock = clock
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
        self.log.warning("%s unavailable: %s", self.what, cause)
        return True

    def recovered(self, detail: str = "") -> float | None:
        """End an outage in progress; its length in seconds (and one line), else None."""
        if self.since is None:
            return None
        length = self.clock() - self.since
        self.since = None
        failures, self.failures = self.failures, 0
        extra = f"; {detail}" if detail else ""
        self.log.warning("%s back after %.1f s (%s failed attempts)%s", self.what, length,
                         f"{failures:,}", extra)
        return length
