"""Where the INT exporter's report packets go: a UDP socket, or a list for tests."""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence
from typing import Protocol


class DatagramSender(Protocol):
    """Sends report packets to the collector."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def send(self, datagrams: Sequence[bytes]) -> int:
        """Send each datagram; return how many the network stack accepted."""


class UdpSender:
    """A UDP socket connected to ``(host, port)``; a refused datagram is counted, not raised.

    The collector's name is resolved at the first send, and again after a send
    that failed, so a collector that starts later or moves to a new address
    (a recreated container) is found; until then datagrams count as not sent.
    """

    def __init__(self, host: str, port: int) -> None:
        self.address = (host, port)
        self._sock: socket.socket | None = None
        self._started = False

    def start(self) -> None:
        self._started = True

    def stop(self) -> None:
        self._started = False
        self._close()

    def _close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _connected(self) -> socket.socket | None:
        if self._sock is None:
            try:
                family, kind, proto, _, addr = socket.getaddrinfo(
                    *self.address, type=socket.SOCK_DGRAM)[0]
                sock = socket.socket(family, kind, proto)
                sock.connect(addr)
            except OSError:
                return None
            self._sock = sock
        return self._sock

    def send(self, datagrams: Sequence[bytes]) -> int:
        if not self._started:
            raise RuntimeError(f"UDP sender to {self.address} is not started")
        sock = self._connected()
        if sock is None:
            return 0
        sent = 0
        for datagram in datagrams:
            try:
                sock.send(datagram)
                sent += 1
            except OSError:
                continue
        if sent < len(datagrams):
            self._close()
        return sent


class ListSender:
    """A DatagramSender that keeps every datagram, for tests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.datagrams: list[bytes] = []

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def send(self, datagrams: Sequence[bytes]) -> int:
        with self._lock:
            self.datagrams.extend(datagrams)
        return len(datagrams)
