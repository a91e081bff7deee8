"""The consumer loop: a poison record is dead-lettered and the loop goes on; a
transient failure retries the same batch; a loop that cannot go on says so."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from fabricops.core.bus import DEFAULT_PREFIX, BusError, Message, Topic, topic_name
from fabricops.core.consumer import ConsumerLoop, ConsumerLoopConfig
from fabricops.core.deadletter import DeadLetter
from fabricops.core.liveness import Liveness
from fabricops.core.membus import MemoryBus

TOPIC = "fabricops.test.v1"
DLQ = topic_name(Topic.DEAD_LETTERS, DEFAULT_PREFIX)
FAST = ConsumerLoopConfig(poll_timeout_s=0.05, backoff_s=0.01, max_backoff_s=0.05)


class TransientError(RuntimeError):
    transient = True


def _run_until(loop: ConsumerLoop, done: Callable[[], bool], timeout_s: float = 60) -> None:
    """Run ``loop`` on a thread until ``done()`` or it ends; fail if neither in time."""
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    try:
        finished = threading.Event()

        def watch() -> None:
            while not (done() or not thread.is_alive()):
                if stop.wait(0.01):
                    return
            finished.set()

        threading.Thread(target=watch, daemon=True).start()
        assert finished.wait(timeout_s), "the loop neither finished its work nor ended"
    finally:
        stop.set()
        thread.join(timeout=30)


def _bus() -> MemoryBus:
    bus = MemoryBus()
    bus.start()
    return bus


def _dead_letters(bus: MemoryBus) -> list[DeadLetter]:
    consumer = bus.subscribe([DLQ], "reader")
    return [DeadLetter.decode(m.value) for m in consumer.poll(0.5, 10_000)]


def _loop(bus: MemoryBus, handle: Callable[[list[Message]], object], **kw: object
          ) -> ConsumerLoop:
    return ConsumerLoop(kw.pop("config", FAST), bus, [TOPIC], "g", handle,  # type: ignore[arg-type]
                        name="worker", registry=CollectorRegistry(), **kw)  # type: ignore[arg-type]


def test_a_poison_record_is_dead_lettered_and_every_good_record_is_handled() -> None:
    bus = _bus()
    bus.publish(TOPIC, b"k", [b"1", b"2", b"poison", b"4"])
    handled: list[bytes] = []
    recovered: list[int] = []

    def handle(batch: list[Message]) -> None:
        values = [int(m.value) for m in batch]  # raises on the poison record
        handled.extend(str(v).encode() for v in values)

    liveness = Liveness()
    loop = _loop(bus, handle, liveness=liveness, recover=lambda: recovered.append(1))
    _run_until(loop, lambda: len(handled) == 3)
    assert handled == [b"1", b"2", b"4"]
    assert recovered, "the handler was asked to drop half-applied state"
    [letter] = _dead_letters(bus)
    assert (letter.topic, letter.offset, letter.reason, letter.value) == (
        TOPIC, 2, "handler_error", b"poison")
    assert "ValueError" in letter.detail
    assert loop.dead_letters.count("handler_error") == 1
    assert liveness.dead_workers() == []
    # the batch was committed: a new member of the group starts after it
    bus.publish(TOPIC, b"k", [b"5"])
    assert [m.value for m in bus.subscribe([TOPIC], "g").poll(0.5)] == [b"5"]


def test_a_handler_holding_records_keeps_them_uncommitted_until_it_drains() -> None:
    bus = _bus()
    bus.publish(TOPIC, b"k", [b"1", b"2", b"3"])
    held: list[Message] = []
    owned: list[set[tuple[str, int]]] = []
    drained: list[int] = []

    def hold() -> dict[tuple[str, int], int]:
        return {(m.topic, m.partition): m.offset for m in held[:1]}

    def drain() -> None:
        drained.append(len(held))
        held.clear()

    loop = _loop(bus, held.extend, hold=hold, assigned=owned.append, drain=drain)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while sum(bus.read_positions("g", TOPIC).values()) < 3:
            assert time.monotonic() < deadline, "the loop did not read the records"
            stop.wait(0.01)
        while not bus.committed("g", TOPIC):  # until a commit with the hold in place
            assert time.monotonic() < deadline, "the loop did not commit"
            stop.wait(0.01)
        [partition] = {p for p, off in bus.read_positions("g", TOPIC).items() if off}
        assert bus.committed("g", TOPIC)[partition] == 0, "held from the first record"
        assert owned, "the handler heard of its partitions"
        assert (TOPIC, partition) in owned[0]
    finally:
        stop.set()
        thread.join(timeout=30)
    assert drained == [3], "stopping let the handler make what it held durable"
    assert bus.committed("g", TOPIC)[partition] == 3, "then committed everything"


def test_the_handler_hears_before_each_batch_which_partitions_are_read_to_their_end(
        ) -> None:
    """Polls of 2 from 5 records of one key: the handler sees the partition read to
    its end only with the batch that holds its last record."""
    bus = _bus()
    bus.publish(TOPIC, b"k", [b"1", b"2", b"3", b"4", b"5"])
    ends: list[set[tuple[str, int]]] = []
    seen: list[tuple[int, bool]] = []

    def handle(batch: list[Message]) -> None:
        seen.extend((int(m.value), (m.topic, m.partition) in ends[-1]) for m in batch)

    loop = _loop(bus, handle, caught_up=ends.append,
                 config=FAST.model_copy(update={"max_records": 2}))
    _run_until(loop, lambda: len(seen) == 5)
    assert seen == [(1, False), (2, False), (3, False), (4, False), (5, True)]
    bus.stop()


def test_a_transient_failure_retries_the_same_batch_and_sets_nothing_aside() -> None:
    bus = _bus()
    bus.publish(TOPIC, b"k", [b"a", b"b"])
    calls: list[list[bytes]] = []

    def handle(batch: list[Message]) -> None:
        calls.append([m.value for m in batch])
        if len(calls) <= 3:
            raise TransientError("database restarting")

    loop = _loop(bus, handle)
    _run_until(loop, lambda: len(calls) == 4)
    assert calls == [[b"a", b"b"]] * 4
    assert _dead_letters(bus) == []
    assert loop.m_failures.labels("worker", "transient")._value.get() == 3


def test_a_loop_that_cannot_go_on_reports_its_worker_dead_with_the_reason() -> None:
    bus = _bus()
    bus.publish(TOPIC, b"k", [b"a"])
    clock = [0.0]

    def handle(_: list[Message]) -> None:
        clock[0] += 100.0  # each attempt takes 100 s of the loop's clock
        raise TransientError("connection refused")

    liveness = Liveness()
    loop = _loop(bus, handle, liveness=liveness, clock=lambda: clock[0],
                 config=FAST.model_copy(update={"give_up_after_s": 250}))
    _run_until(loop, lambda: bool(liveness.dead_workers()))
    [dead] = liveness.dead_workers()
    assert dead.name == "worker"
    assert "connection refused" in dead.reason
    assert _dead_letters(bus) == [], "a valid record is never dead-lettered for an outage"


def test_a_bus_error_rejoins_the_group_and_the_batch_comes_again() -> None:
    bus = _bus()
    bus.publish(TOPIC, b"k", [b"a"])
    calls: list[bytes] = []

    def handle(batch: list[Message]) -> None:
        calls.extend(m.value for m in batch)
        if len(calls) == 1:
            raise BusError("broker gone")

    loop = _loop(bus, handle)
    _run_until(loop, lambda: len(calls) == 2)
    assert calls == [b"a", b"a"]


@pytest.mark.parametrize("attempts", [1, 5, 50])
def test_backoff_has_jitter_and_never_waits_past_the_cap(attempts: int) -> None:
    loop = _loop(_bus(), lambda _: None,
                 config=ConsumerLoopConfig(backoff_s=0.5, max_backoff_s=5.0))
    waits = [loop._backoff(attempts) for _ in range(200)]
    assert max(waits) <= 5.0
    assert len(set(waits)) > 1, "retries of many workers do not fall in step"


def _joining_gauge(loop: ConsumerLoop) -> float:
    """``fabricops_consumer_joining_seconds`` of the worker, as a scrape reads it."""
    [family] = loop.m_joining.collect()
    [value] = [s.value for s in family.samples if s.labels == {"worker": "worker"}]
    return value


class _Stuck:
    """A member whose group never finishes its rebalance: it owns nothing, reads nothing
    (or, ``broken``, whose every poll fails)."""

    def __init__(self, waited_s: float, broken: bool = False) -> None:
        self.waited_s, self.broken = waited_s, broken
        self.closed = False
        self.polls = 0

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[Message]:
        self.polls += 1
        if self.broken:
            raise BusError("broker gone")
        return []

    def commit(self, hold: object = None) -> None:
        pass

    def assignment(self) -> set[tuple[str, int]]:
        return set()

    def joining_s(self) -> float:
        return self.waited_s

    def caught_up(self) -> set[tuple[str, int]]:
        return set()

    def close(self) -> None:
        self.closed = True


class _StuckFirst:
    """A bus whose first ``stuck`` subscriptions hang in a rebalance; the rest are real."""

    def __init__(self, bus: MemoryBus, stuck: int, first: _Stuck | None = None) -> None:
        self.bus, self.left = bus, stuck
        self.members: list[_Stuck] = [first] if first is not None else []

    def subscribe(self, topics: list[str], group: str) -> object:
        if self.members and self.members[0].broken and len(self.members) == 1:
            self.members.append(_Stuck(waited_s=30.0))
            return self.members[-1]
        if self.left <= 0:
            return self.bus.subscribe(topics, group)
        self.left -= 1
        self.members.append(_Stuck(waited_s=120.0))
        return self.members[-1]

    def __getattr__(self, name: str) -> object:
        return getattr(self.bus, name)


def test_a_rebalance_that_never_finishes_is_left_and_the_group_joined_again() -> None:
    bus = _bus()
    bus.publish(TOPIC, b"k", [b"a"])
    stuck = _StuckFirst(bus, stuck=1)
    handled: list[bytes] = []
    def handle(batch: list[Message]) -> None:
        handled.extend(m.value for m in batch)

    loop = _loop(stuck, handle, config=FAST.model_copy(  # type: ignore[arg-type]
        update={"rejoin_after_s": 90}))
    _run_until(loop, lambda: handled == [b"a"])
    assert stuck.members[0].closed, "the member stuck in the rebalance left the group"
    assert loop.m_failures.labels("worker", "bus")._value.get() == 1
    assert _joining_gauge(loop) == 0, "the new member settled"


def test_a_group_that_never_settles_gives_up_and_names_the_rebalance() -> None:
    bus = _bus()
    stuck = _StuckFirst(bus, stuck=1_000)
    clock = [0.0]

    def tick() -> float:
        clock[0] += 10.0  # every look at the clock is ten seconds later
        return clock[0]

    liveness = Liveness()
    loop = _loop(stuck, lambda _: None, liveness=liveness, clock=tick,  # type: ignore[arg-type]
                 config=FAST.model_copy(update={"give_up_after_s": 100,
                                                "rejoin_after_s": 90}))
    _run_until(loop, lambda: bool(liveness.dead_workers()))
    [dead] = liveness.dead_workers()
    assert "rebalance has not finished after 120 s" in dead.reason
    assert len(stuck.members) > 1, "it joined again before giving up"
    assert all(m.closed for m in stuck.members)


def test_a_member_waiting_less_than_rejoin_after_s_is_left_alone() -> None:
    bus = _bus()
    stuck = _StuckFirst(bus, stuck=1)
    loop = _loop(stuck, lambda _: None,  # type: ignore[arg-type]
                 config=FAST.model_copy(update={"rejoin_after_s": 121}))
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while _joining_gauge(loop) != 120.0:
        assert time.monotonic() < deadline, "the wait was never shown"
        time.sleep(0.01)
    stop.set()
    thread.join(timeout=30)
    assert loop.m_failures.labels("worker", "bus")._value.get() == 0


def test_an_outage_ends_only_once_the_rejoined_member_has_settled() -> None:
    bus = _bus()
    broken = _Stuck(waited_s=0.0, broken=True)
    stuck = _StuckFirst(bus, stuck=0, first=broken)
    loop = _loop(stuck, lambda _: None)  # type: ignore[arg-type]
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop, broken), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while len(stuck.members) < 2 or stuck.members[1].polls < 3:
        assert time.monotonic() < deadline, "the loop never joined again"
        time.sleep(0.01)
    assert loop._outage.down, "a member still waiting for its group is not back"
    stop.set()
    thread.join(timeout=30)
