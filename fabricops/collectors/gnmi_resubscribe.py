"""How a gNMI target's subscription is kept: run it again each time it ends."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Any, Final

from fabricops.core.backoff import Backoff

_REJECTED: Final = {"INVALID_ARGUMENT", "NOT_FOUND", "UNIMPLEMENTED", "FAILED_PRECONDITION"}
_AUTH: Final = {"UNAUTHENTICATED", "PERMISSION_DENIED"}


class Attempt(Enum):
    """How one subscription ended."""

    FAILED = "failed"  # before the target answered anything
    DROPPED = "dropped"  # after answering: the target is worth a quick retry
    RESUBSCRIBE = "resubscribe"  # on purpose (a new sample interval): again at once


async def keep_subscribed(subscribe: Callable[[], Awaitable[Attempt]], backoff: Backoff,
                          rng: random.Random, *, closing: Callable[[], bool],
                          on_retry: Callable[[], None]) -> None:
    """Run ``subscribe`` again each time it ends, until ``closing()``.

    After a failure, wait ``backoff.delay_s(n)`` for the n-th failure in a row (a
    stream dropped after answering is a first failure again); a resubscription
    asked for starts at once. So a target back after any outage is subscribed
    again at most ``backoff.max_s`` after it returns, plus one attempt.
    ``on_retry`` is called before each retry after a wait.
    """
    failures = 0
    while not closing():
        ended = await subscribe()
        if ended is Attempt.RESUBSCRIBE:
            failures = 0
            continue
        failures = 1 if ended is Attempt.DROPPED else failures + 1
        await asyncio.sleep(backoff.delay_s(failures, rng))
        on_retry()


def failure_kind(exc: Any, delivered: bool) -> str:
    """The error reason of a subscription that ended with gRPC error ``exc`` (``delivered``:
    after the target answered)."""
    code = exc.code().name
    if code in _AUTH:
        return "auth"
    if code in _REJECTED:
        return "rejected"
    if code == "UNAVAILABLE" and not delivered:
        return "unreachable"
    return "stream"


__all__ = ["Attempt", "failure_kind", "keep_subscribed"]
