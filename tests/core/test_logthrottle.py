"""Outage lines stay readable when hundreds of targets go down or come back at once."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from fabricops.core.logthrottle import Outage, OutageLines

log = logging.getLogger("fabricops.test.outages")


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Timers:
    """A ``schedule`` that runs nothing until the test says so."""

    def __init__(self) -> None:
        self.pending: list[tuple[float, Callable[[], None], _Timers.Handle]] = []

    class Handle:
        cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    def __call__(self, delay_s: float, then: Callable[[], None]) -> Handle:
        handle = self.Handle()
        self.pending.append((delay_s, then, handle))
        return handle

    def fire(self) -> None:
        due, self.pending = self.pending, []
        for _, then, handle in due:
            if not handle.cancelled:
                then()


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == log.name]


def _book(clock: _Clock, timers: _Timers) -> OutageLines:
    return OutageLines(log, "SNMP targets", interval_s=10.0, burst=3, clock=clock,
                       schedule=timers)


def test_a_mass_outage_logs_a_few_lines_then_one_that_counts_the_rest(
        caplog: pytest.LogCaptureFixture) -> None:
    clock, timers = _Clock(), _Timers()
    lines = _book(clock, timers)
    outages = [Outage(log, f"SNMP target leaf-{n} (10.0.0.{n}:161)", clock, lines, f"leaf-{n}")
               for n in range(1000)]
    with caplog.at_level(logging.WARNING, logger=log.name):
        for n, outage in enumerate(outages):
            clock.now = 100.0 + n * 0.005  # all within 5 s
            outage.failed("no answer in 2 tries of 1.0 s")
        assert len(_lines(caplog)) == 3  # the rest wait for the interval's end
        assert [delay for delay, _, _ in timers.pending] == [pytest.approx(10.0, abs=0.02)]
        timers.fire()
    said = _lines(caplog)
    assert said[:3] == [f"SNMP target leaf-{n} (10.0.0.{n}:161) unavailable: no answer in 2 "
                        "tries of 1.0 s" for n in range(3)]
    assert said[3:] == ["SNMP targets: 997 more unavailable in the last 10 s "
                        "(leaf-3, leaf-4, leaf-5 and 994 more)"]
    assert all(o.down for o in outages)


def test_returns_are_counted_apart_from_starts(caplog: pytest.LogCaptureFixture) -> None:
    clock, timers = _Clock(), _Timers()
    lines = _book(clock, timers)
    outages = [Outage(log, f"gNMI target spine-{n}", clock, lines, f"spine-{n}")
               for n in range(5)]
    with caplog.at_level(logging.WARNING, logger=log.name):
        for outage in outages:
            outage.failed("UNAVAILABLE")
        clock.now += 10.0
        timers.fire()
        clock.now += 20.0
        for outage in outages:
            assert outage.recovered() == pytest.approx(30.0)
        clock.now += 10.0
        timers.fire()
    assert _lines(caplog) == [
        *(f"gNMI target spine-{n} unavailable: UNAVAILABLE" for n in range(3)),
        "SNMP targets: 2 more unavailable in the last 10 s (spine-3, spine-4)",
        *(f"gNMI target spine-{n} back after 30.0 s (1 failed attempts)" for n in range(3)),
        "SNMP targets: 2 more back in the last 10 s (spine-3, spine-4)"]


def test_a_new_interval_sums_up_the_last_first_and_speaks_again(
        caplog: pytest.LogCaptureFixture) -> None:
    clock, timers = _Clock(), _Timers()
    lines = _book(clock, timers)
    with caplog.at_level(logging.WARNING, logger=log.name):
        for n in range(5):
            lines.say("unavailable", f"leaf-{n}", "leaf-%d unavailable", n)
        clock.now += 12.0  # the timer is late: the next line sums up first
        for n in range(5, 9):
            lines.say("unavailable", f"leaf-{n}", "leaf-%d unavailable", n)
        timers.fire()  # the first interval's timer: cancelled, the second's: due
    assert _lines(caplog) == [
        "leaf-0 unavailable", "leaf-1 unavailable", "leaf-2 unavailable",
        "SNMP targets: 2 more unavailable in the last 10 s (leaf-3, leaf-4)",
        "leaf-5 unavailable", "leaf-6 unavailable", "leaf-7 unavailable",
        "SNMP targets: 1 more unavailable in the last 10 s (leaf-8)"]


def test_flush_sums_up_what_is_held_and_cancels_the_timer(
        caplog: pytest.LogCaptureFixture) -> None:
    clock, timers = _Clock(), _Timers()
    lines = _book(clock, timers)
    with caplog.at_level(logging.WARNING, logger=log.name):
        for n in range(4):
            lines.say("unavailable", f"leaf-{n}", "leaf-%d unavailable", n)
        lines.flush()
        timers.fire()  # cancelled: says nothing more
        lines.flush()  # nothing held: says nothing
    assert _lines(caplog) == ["leaf-0 unavailable", "leaf-1 unavailable", "leaf-2 unavailable",
                              "SNMP targets: 1 more unavailable in the last 10 s (leaf-3)"]


def test_without_a_book_an_outage_logs_its_own_two_lines(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    outage = Outage(log, "Kafka at 127.0.0.1:9092", clock)
    with caplog.at_level(logging.WARNING, logger=log.name):
        assert outage.failed("connection refused")
        assert not outage.failed("connection refused")
        clock.now += 2.5
        assert outage.recovered("7 records resent") == pytest.approx(2.5)
    assert _lines(caplog) == [
        "Kafka at 127.0.0.1:9092 unavailable: connection refused",
        "Kafka at 127.0.0.1:9092 back after 2.5 s (2 failed attempts); 7 records resent"]
