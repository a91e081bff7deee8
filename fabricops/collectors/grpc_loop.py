"""Event loops that make grpc.aio calls, and what asyncio should not report of them.

grpc binds every event loop that makes a call to one completion queue, read by
each of them. Two of its shutdown traces are noise, not faults, and asyncio's
default handler prints them as tracebacks, possibly after a command's last line:

* the task awaiting a call's status stays pending when the call is cancelled as
  its loop stops, and is reported as "destroyed but pending" when collected;
* a loop that wakes for a completion belonging to another loop, since closed
  or already served, raises RuntimeError or BlockingIOError in
  ``PollerCompletionQueue._handle_events`` (grpc/grpc#25364); the event is
  served on the next wake-up.

``quiet_grpc_noise`` drops those two (logged at DEBUG); anything else goes to
asyncio's default handler. ``run`` is ``asyncio.run`` with it installed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


def quiet_grpc_noise(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """An asyncio exception handler: grpc's shutdown noise dropped, the rest reported."""
    if _is_noise(context):
        log.debug("grpc on stop: %s: %r", context.get("message"),
                  context.get("task") or context.get("handle"))
        return
    loop.default_exception_handler(context)


def _is_noise(context: dict[str, Any]) -> bool:
    task = context.get("task")
    if isinstance(task, asyncio.Task) and not task.done():
        return "_AioCall" in getattr(task.get_coro(), "__qualname__", "")
    exc = context.get("exception")
    return (isinstance(exc, RuntimeError | BlockingIOError)
            and "PollerCompletionQueue._handle_events" in repr(context.get("handle")))


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a loop whose exception handler is ``quiet_grpc_noise``."""
    async def quietly() -> T:
        asyncio.get_running_loop().set_exception_handler(quiet_grpc_noise)
        return await main

    return asyncio.run(quietly())
