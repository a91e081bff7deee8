"""An asyncio event loop on a virtual clock, and an in-memory UDP network on it.

``VirtualClockLoop.time()`` starts at 0 and moves only when the loop has nothing
ready to run: it then jumps to the next timer at once instead of waiting. So a
minute of retries, timeouts and sleeps runs in milliseconds, and what happens at
which virtual second does not depend on how busy the machine is. The clock never
passes ``horizon_s``: there the loop waits for real (for a ``call_soon_threadsafe``,
such as a stop).

Datagram endpoints made by ``create_datagram_endpoint`` live on the loop's
``network`` (no sockets): a datagram is delivered on the next loop iteration, at
the same virtual time. ``network.serve(addr, handler)`` puts a fake agent at
``addr``; ``handler(data, source, reply)`` may call ``reply(data)`` at once or
later (``loop.call_later``).
"""

from __future__ import annotations

import asyncio
import selectors
import socket
from collections.abc import Callable
from typing import Any

Address = tuple[str, int]
Handler = Callable[[bytes, Address, Callable[[bytes], None]], None]


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self, loop: VirtualClockLoop) -> None:
        super().__init__()
        self._vloop = loop

    def select(self, timeout: float | None = None) -> list[Any]:
        ready: list[Any] = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None or self._vloop.now_s + timeout > self._vloop.horizon_s:
            return list(super().select(None))
        self._vloop.now_s += timeout
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock jumps over idle time (see the module docstring)."""

    def __init__(self, horizon_s: float = 3600.0) -> None:
        self.now_s = 0.0
        self.horizon_s = horizon_s
        self.network = UdpNetwork(self)
        super().__init__(selector=_JumpingSelector(self))

    def time(self) -> float:
        return self.now_s

    async def create_datagram_endpoint(  # type: ignore[override]
        self, protocol_factory: Callable[[], asyncio.DatagramProtocol], *args: Any,
        **kwargs: Any,
    ) -> tuple[asyncio.DatagramTransport, asyncio.DatagramProtocol]:
        protocol = protocol_factory()
        transport = self.network.endpoint(protocol)
        protocol.connection_made(transport)
        return transport, protocol


class UdpNetwork:
    """Datagrams between endpoints of one VirtualClockLoop and fake agents on it."""

    def __init__(self, loop: VirtualClockLoop) -> None:
        self.loop = loop
        self.agents: dict[Address, Handler] = {}
        self._next_port = 40000

    def serve(self, address: Address, handler: Handler) -> None:
        self.agents[address] = handler

    def endpoint(self, protocol: asyncio.DatagramProtocol) -> _Endpoint:
        self._next_port += 1
        return _Endpoint(self, protocol, ("127.0.0.1", self._next_port))

    def deliver(self, data: bytes, source: Address, to: Address,
                back: asyncio.DatagramProtocol) -> None:
        handler = self.agents.get(to)
        if handler is None:
            return  # nobody there: the datagram is lost, as UDP does

        def reply(answer: bytes) -> None:
            self.loop.call_soon(back.datagram_received, answer, to)

        self.loop.call_soon(handler, data, source, reply)


class _NoSocket:
    def setsockopt(self, *args: Any) -> None:
        pass


class _Endpoint(asyncio.DatagramTransport):
    def __init__(self, network: UdpNetwork, protocol: asyncio.DatagramProtocol,
                 address: Address) -> None:
        super().__init__()
        self._network = network
        self._protocol = protocol
        self._address = address
        self._closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"socket": _NoSocket(), "sockname": self._address,
                "family": socket.AF_INET}.get(name, default)

    def sendto(self, data: Any, addr: Any = None) -> None:
        if not self._closed:
            self._network.deliver(bytes(data), self._address, (addr[0], addr[1]),
                                  self._protocol)

    def close(self) -> None:
        self._closed = True

    def is_closing(self) -> bool:
        return self._closed

    def abort(self) -> None:
        self._closed = True
