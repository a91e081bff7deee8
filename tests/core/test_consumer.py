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
