"""A device back after 60 s down is polled or streaming again within 6 s.

Shown on a virtual clock (``virtual_clock``), with the collectors' default
settings: a minute of outage and every retry and timeout in it run in
milliseconds, and the figures do not depend on how busy the machine is. The
real-gRPC and real-UDP runs of the same story are in ``test_reconnect``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import re
import threading
import time
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from fabricops.collectors.gnmi import Attempt, keep_subscribed
from fabricops.collectors.gnmi_config import GnmiCollectorConfig
from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, SnmpTarget
from fabricops.core.inventory import SnmpCredentials
from fabricops.core.sinks import ListSink

from .snmp_messages import end_of_mib, read_getbulk
from .virtual_clock import Address, VirtualClockLoop

RETURNS_S = [60.0 + k * 0.45 for k in range(12)]  # a 60 s outage ending anywhere in a cycle
ACCEPTANCE_S = 6.0

# --- gNMI: the resubscription loop ----------------------------------------------------


def _gnmi_back_after(down_until_s: float, attempt_s: float, seed: int
                     ) -> tuple[float, list[float]]:
    """Seconds from the target's return to a subscription that streams, and the tries.

    The stream drops at t=0; every try before ``down_until_s`` fails after
    ``attempt_s`` (a refused connection), the first one after it streams.
    """
    loop = VirtualClockLoop()
    tries: list[float] = []

    async def subscribe() -> Attempt:
        tries.append(loop.time())
        if len(tries) == 1 or loop.time() >= down_until_s:
            return Attempt.DROPPED
        await asyncio.sleep(attempt_s)
        return Attempt.FAILED

    async def follow() -> None:
        async with asyncio.timeout(600):
            await keep_subscribed(subscribe, GnmiCollectorConfig().backoff, random.Random(seed),
                                  closing=lambda: len(tries) > 1 and tries[-1] >= down_until_s,
                                  on_retry=lambda: None)

    try:
        loop.run_until_complete(follow())
    finally:
        loop.close()
    return tries[-1] - down_until_s, tries


@pytest.mark.parametrize("attempt_s", [0.001, 0.2])
@pytest.mark.parametrize("seed", range(5))
def test_a_gnmi_target_back_after_a_minute_is_subscribed_again_within_the_cap(
    seed: int, attempt_s: float,
) -> None:
    for down_until_s in RETURNS_S:
        back_s, tries = _gnmi_back_after(down_until_s, attempt_s, seed)
        assert 0 <= back_s <= 5.0 + attempt_s < ACCEPTANCE_S, (down_until_s, tries)
        gaps = [b - a - attempt_s for a, b in itertools.pairwise(tries[1:])]
        assert max(gaps) <= 5.0 + 1e-9, "never waits past the 5 s cap"
        assert all(g >= 4.0 - 1e-9 for g in gaps[-3:]), "at the cap, jittered by 20 %"


def test_a_resubscription_asked_for_starts_at_once() -> None:
    loop = VirtualClockLoop()
    ends = [Attempt.FAILED, Attempt.FAILED, Attempt.RESUBSCRIBE, Attempt.FAILED, Attempt.FAILED]
    tries: list[float] = []

    async def subscribe() -> Attempt:
        tries.append(loop.time())
        return ends[len(tries) - 1]

    try:
        loop.run_until_complete(keep_subscribed(
            subscribe, GnmiCollectorConfig().backoff, random.Random(1),
            closing=lambda: len(tries) == len(ends), on_retry=lambda: None))
    finally:
        loop.close()
    assert tries[2] - tries[1] >= 0.8, "the second failure in a row waits longer"
    assert tries[3] == tries[2], "a new sample interval is subscribed without waiting"
    assert 0.4 <= tries[4] - tries[3] <= 0.5, "then the backoff starts again from 0.5 s"


# --- SNMP: the poller's schedule ------------------------------------------------------

class FakeAgent:
    """An SNMP agent on the virtual network, silent from ``down_s[0]`` to ``down_s[1]``."""

    def __init__(self, loop: VirtualClockLoop, down_s: tuple[float, float]) -> None:
        self.loop = loop
        self.down_s = down_s
        self.requests: list[tuple[float, bool]] = []  # (virtual time, answered)
        self.done = threading.Event()

    def handle(self, data: bytes, _source: Address, reply: Callable[[bytes], None]) -> None:
        now = self.loop.time()
        up = not self.down_s[0] <= now < self.down_s[1]
        self.requests.append((now, up))
        if up:
            self.loop.call_later(0.002, reply, end_of_mib(*read_getbulk(data)))
            if now >= self.down_s[1]:
                self.done.set()


def _snmp_back_after(down_s: tuple[float, float]) -> tuple[FakeAgent, CollectorRegistry]:
    loop = VirtualClockLoop(horizon_s=down_s[1] + 20)
    agent = FakeAgent(loop, down_s)
    loop.network.serve(("127.0.0.1", 161), agent.handle)
    registry = CollectorRegistry()
    target = SnmpTarget(device="leaf-0", interval_s=60.0,  # default timeout and retries
                        credentials=SnmpCredentials(community="leaf-0"))
    poller = SnmpPoller(SnmpPollerConfig(targets=(target,)), ListSink(), registry,
                        loop_factory=lambda: loop)
    poller.start()
    try:
        assert agent.done.wait(60), "the poller never came back (guard, not a measure)"
        deadline = time.monotonic() + 60
        while poller.status()["leaf-0"].up is not True:
            assert time.monotonic() < deadline, poller.status()
            time.sleep(0.01)
    finally:
        poller.stop()
    return agent, registry


@pytest.mark.parametrize("down_until_s", [d + 30.0 for d in RETURNS_S])
def test_an_snmp_switch_back_after_a_minute_is_polled_again_within_6_s(
    down_until_s: float, caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="fabricops.collectors.snmp"):
        agent, registry = _snmp_back_after((30.0, down_until_s))
    unanswered = [t for t, up in agent.requests if not up]
    answered_after = [t for t, up in agent.requests if up and t >= down_until_s]
    assert unanswered[0] >= 60.0, "down from its poll at 60 s"
    probes = [t for t in unanswered if t >= 62.0]
    assert all(4.99 <= b - a <= 5.01 for a, b in itertools.pairwise(probes))
    assert answered_after[0] - down_until_s <= 5.0 + 1e-6
    assert answered_after[-1] - down_until_s < ACCEPTANCE_S, "probe and walk within 6 s"
    assert (registry.get_sample_value("fabricops_snmp_polls_total", {"result": "ok"})
            or 0) >= 2
    lines = [r.getMessage() for r in caplog.records if r.name == "fabricops.collectors.snmp"]
    assert sum("unavailable" in line for line in lines) == 1, lines
    [back] = [line for line in lines if "back after" in line]
    logged_s = float(re.search(r"back after ([0-9.]+) s", back)[1])  # type: ignore[index]
    assert logged_s == pytest.approx(answered_after[-1] - 62.0, abs=0.1), "down since 62 s"
