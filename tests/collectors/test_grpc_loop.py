"""grpc's shutdown noise is dropped from a loop's reports; every other report stays."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from fabricops.collectors import grpc_loop
from fabricops.collectors.grpc_loop import quiet_grpc_noise


class _AioCall:  # named as grpc.aio's call, whose status task a cancelled call leaves
    async def _handle_status_once_received(self) -> None:
        await asyncio.get_running_loop().create_future()


class _Other:
    async def wait(self) -> None:
        await asyncio.get_running_loop().create_future()


class PollerCompletionQueue:  # named as grpc.aio's, woken for another loop's event
    def __init__(self, error: Exception) -> None:
        self.error = error

    def _handle_events(self) -> None:
        raise self.error


def _asyncio_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "asyncio" and r.levelno >= logging.ERROR]


def test_a_pending_call_status_is_dropped_and_other_pending_tasks_are_reported(
        caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(quiet_grpc_noise)

    async def leave_pending() -> None:  # unreferenced on purpose: collected after close
        asyncio.ensure_future(_AioCall()._handle_status_once_received())  # noqa: RUF006
        asyncio.ensure_future(_Other().wait())  # noqa: RUF006
        await asyncio.sleep(0)

    with caplog.at_level(logging.DEBUG):
        loop.run_until_complete(leave_pending())
        loop.close()
        del loop
        gc.collect()
    errors = _asyncio_errors(caplog)
    assert len(errors) == 1, errors
    assert "destroyed" in errors[0]
    assert "_Other.wait" in caplog.text
    assert [r.levelname for r in caplog.records if "_AioCall" in r.getMessage()] == ["DEBUG"]


@pytest.mark.parametrize("error", [RuntimeError("Event loop is closed"),
                                   BlockingIOError(11, "Resource temporarily unavailable")])
def test_a_poller_woken_for_another_loop_says_nothing(
        error: Exception, caplog: pytest.LogCaptureFixture) -> None:
    async def wake(queue: PollerCompletionQueue) -> None:
        asyncio.get_running_loop().call_soon(queue._handle_events)
        await asyncio.sleep(0.01)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        grpc_loop.run(wake(PollerCompletionQueue(error)))
    assert _asyncio_errors(caplog) == []


def test_any_other_callback_error_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    async def wake() -> None:
        asyncio.get_running_loop().call_soon(_Other().__init__, "unexpected")
        await asyncio.sleep(0.01)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        grpc_loop.run(wake())
    assert len(_asyncio_errors(caplog)) == 1


def test_run_returns_what_the_coroutine_returns() -> None:
    async def answer() -> int:
        return 42

    assert grpc_loop.run(answer()) == 42
