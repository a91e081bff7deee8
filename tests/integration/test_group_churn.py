"""A consumer group on a real Kafka-protocol broker settles again after one member is
killed with -9 and replaced, and the member that lived on keeps its membership:
the commit a rebalance overtakes is counted, not treated as a bus outage."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.core.consumer import ConsumerLoop, ConsumerLoopConfig
from fabricops.core.kafkabus import KafkaBus
from tests.integration.conftest import bus_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = set(range(8))
ROOT = Path(__file__).resolve().parents[2]


class Member:
    """``group_member`` in a process of its own; ``owns`` is what it last printed."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.owns: set[int] = set()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.group_member", bootstrap, topic, group],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("owns"):
                parts = line.split()[1:]
                self.owns = {int(p) for p in parts[0].split(",")} if parts else set()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def _wait(done: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.fixture
def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"churn{tag}", f"churn{tag}.g"


def test_a_member_killed_and_replaced_leaves_a_group_that_settles_again(
    kafka_broker: str, names: tuple[str, str],
) -> None:
    topic, group = names
    registry = CollectorRegistry()
    bus = KafkaBus(bus_config(kafka_broker), registry)
    bus.start()
    bus.publish(topic, b"0", [b"first"])  # creates the topic, 8 partitions
    assert bus.flush(30)
    feeding = threading.Event()
    feeding.set()

    def feed() -> None:
        i = 0
        while feeding.is_set():
            bus.publish(topic, str(i % 16).encode(), [b"x"])
            i += 1
            time.sleep(0.02)

    kept: set[int] = set()

    def assigned(owned: set[tuple[str, int]]) -> None:
        kept.clear()
        kept.update(p for _, p in owned)

    loop = ConsumerLoop(ConsumerLoopConfig(), bus, [topic], group, lambda _: None,
                        name="survivor", registry=registry, assigned=assigned)
    stop = threading.Event()
    threads = [threading.Thread(target=feed, daemon=True),
               threading.Thread(target=loop.run, args=(stop,), daemon=True)]
    for thread in threads:
        thread.start()
    members: list[Member] = []
    try:
        members.append(Member(kafka_broker, topic, group))

        waits: list[float] = []

        def settled() -> bool:
            waits.append(registry.get_sample_value("fabricops_consumer_joining_seconds",
                                                   {"worker": "survivor"}) or 0.0)
            other = members[-1].owns
            return bool(kept) and bool(other) and kept | other == PARTITIONS \
                and not kept & other

        _wait(settled, 90, "two members never split the partitions")
        waits.clear()
        members[-1].kill()
        members.append(Member(kafka_broker, topic, group))
        started = time.monotonic()
        _wait(settled, 90, f"the group did not settle again after a kill -9: survivor "
              f"owns {sorted(kept)}, the new member {sorted(members[-1].owns)}")
        print(f"settled {time.monotonic() - started:.1f} s after the replacement started")
        bus_failures = loop.m_failures.labels("survivor", "bus")._value.get()
        assert bus_failures == 0, "the survivor left the group over a commit a rebalance " \
            "overtook"
        overtaken = registry.get_sample_value("fabricops_kafkabus_commits_overtaken_total",
                                              {"group": group})
        assert overtaken, "the survivor committed through the rebalance, and was refused"
        assert max(waits) > 0, "the survivor's wait for the rebalance was shown"
        assert registry.get_sample_value("fabricops_consumer_joining_seconds",
                                         {"worker": "survivor"}) == 0, "and is over"
    finally:
        feeding.clear()
        stop.set()
        for member in members:
            member.kill()
        for thread in threads:
            thread.join(timeout=30)
        bus.stop()
