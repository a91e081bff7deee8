"""UDP sockets sharing one port, read in batches into one preallocated buffer.

``open_sockets`` binds ``count`` UDP sockets to one address with SO_REUSEPORT:
the kernel spreads senders over them by flow hash (one sender's datagrams stay
on one socket, in order), and each has its own receive buffer. An OSError
names the address.

Each socket asks for ``rcvbuf_bytes`` of receive buffer, past the system's cap
where the process may (root or CAP_NET_ADMIN): the buffer is what absorbs a
burst while the reading thread is not scheduled.

``DatagramSocket`` reads one of them without blocking into fixed slots of a
buffer allocated once (``slots`` x ``slot_bytes`` plus ``PAD_BYTES``): ``fill``
takes what is waiting until the slots are full, ``take`` hands the held
datagrams out as ``Datagrams`` (copied out, packed) and frees the slots;
``kernel_drops`` tells how many datagrams the kernel dropped because the
socket's buffer was full. With ``call="recvmmsg"`` one system call reads up to
1024 datagrams (the C library's ``recvmmsg`` through ``ctypes``; Linux); with
``"recv_into"`` it is one ``recv_into`` per datagram; ``"auto"`` takes the
first where it exists. No package on PyPI offers ``recvmmsg`` and is kept up
(``pysockmmsg`` 0.0.2, 2021, is the only one), hence ``ctypes``.
A datagram longer than a slot is left out and counted in ``Received.too_long``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import socket
import struct
import sys
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np

from fabricops.collectors.int_headers import PAD_BYTES, Datagrams

ReceiveCall = Literal["auto", "recvmmsg", "recv_into"]
_SO_RCVBUFFORCE_LINUX: Final = 33
_SO_MEMINFO_LINUX: Final = 55
_MEMINFO: Final = struct.Struct("9I")
"""SK_MEMINFO_VARS: rmem_alloc, rcvbuf, ..., backlog, drops (the last)."""
_MAX_VLEN: Final = 1024
"""Most datagrams one recvmmsg call reads (the kernel's UIO_MAXIOV)."""


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.POINTER(_IoVec)), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
                ("msg_flags", ctypes.c_int)]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _MsgHdr), ("msg_len", ctypes.c_uint)]


def _libc_recvmmsg() -> Any | None:
    """The C library's ``recvmmsg``, or None where there is none."""
    if not hasattr(socket, "MSG_TRUNC") or os.name != "posix":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        call = libc.recvmmsg
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                     ctypes.c_void_p]
    call.restype = ctypes.c_int
    return call


_RECVMMSG: Final = _libc_recvmmsg()
HAS_RECVMMSG: Final = _RECVMMSG is not None


def open_sockets(host: str, port: int, count: int, rcvbuf_bytes: int) -> list[socket.socket]:
    """``count`` non-blocking UDP sockets bound to ``host:port`` (0: a free port for all)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    share = count > 1
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_DGRAM)
            socks.append(sock)
            _set_rcvbuf(sock, rcvbuf_bytes)
            if share:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            port = sock.getsockname()[1]
            sock.setblocking(False)
    except OSError as exc:
        for sock in socks:
            sock.close()
        raise OSError(exc.errno, f"INT receiver cannot bind {host}:{port}: "
                                 f"{exc.strerror or exc}") from None
    return socks


def _set_rcvbuf(sock: socket.socket, size: int) -> None:
    """Ask for a ``size`` receive buffer past the system's cap where allowed (root or
    CAP_NET_ADMIN), else up to the cap (``net.core.rmem_max``)."""
    force = getattr(socket, "SO_RCVBUFFORCE", _SO_RCVBUFFORCE_LINUX if sys.platform == "linux"
                    else None)
    if force is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, size)
            return
        except PermissionError:
            pass
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)


@dataclass(frozen=True)
class Received:
    """Datagrams taken from a socket, and how many were left out for being too long."""

    datagrams: Datagrams
    too_long: int


class DatagramSocket:
    """Batched non-blocking reads of one socket into a buffer of ``slots`` slots."""

    def __init__(self, sock: socket.socket, slots: int, slot_bytes: int,
                 call: ReceiveCall = "auto") -> None:
        if call == "recvmmsg" and not HAS_RECVMMSG:
            raise ValueError("recvmmsg is not available on this system")
        self.sock, self.slots, self.slot_bytes = sock, slots, slot_bytes
        self.call = "recvmmsg" if call == "auto" and HAS_RECVMMSG else (
            "recv_into" if call == "auto" else call)
        self._data = np.zeros(slots * slot_bytes + PAD_BYTES, np.uint8)
        self._start = np.arange(slots, dtype=np.int64) * slot_bytes
        self._length = np.zeros(slots, np.int64)
        self._held = 0
        if self.call == "recvmmsg":
            self._setup_recvmmsg()
        else:
            view = self._data.data
            self._views = [view[s:s + slot_bytes] for s in self._start.tolist()]

    def _setup_recvmmsg(self) -> None:
        base = self._data.ctypes.data
        self._iov = (_IoVec * self.slots)()
        self._msgs = (_MMsgHdr * self.slots)()
        for i in range(self.slots):
            self._iov[i].iov_base = base + i * self.slot_bytes
            self._iov[i].iov_len = self.slot_bytes
            self._msgs[i].msg_hdr.msg_iov = ctypes.pointer(self._iov[i])
            self._msgs[i].msg_hdr.msg_iovlen = 1
        flags_at = _MMsgHdr.msg_hdr.offset + _MsgHdr.msg_flags.offset
        view = np.dtype({"names": ["flags", "length"], "formats": [np.int32, np.uint32],
                         "offsets": [flags_at, _MMsgHdr.msg_len.offset],
                         "itemsize": ctypes.sizeof(_MMsgHdr)})
        self._results = np.frombuffer(self._msgs, view)  # type: ignore[call-overload]

    @property
    def held(self) -> int:
        """Datagrams received and not yet taken."""
        return self._held

    def fill(self, until: int | None = None) -> int:
        """Read what is waiting until ``until`` (at most ``slots``) are held; return held.

        Raises OSError when the socket fails (not when it merely has nothing).
        """
        limit = self.slots if until is None else min(until, self.slots)
        if self.call == "recvmmsg":
            self._fill_recvmmsg(limit)
        else:
            self._fill_recv_into(limit)
        return self._held

    def _fill_recvmmsg(self, limit: int) -> None:
        assert _RECVMMSG is not None
        fd = self.sock.fileno()
        size = ctypes.sizeof(_MMsgHdr)
        while self._held < limit:
            held = self._held
            want = min(limit - held, _MAX_VLEN)
            got = _RECVMMSG(fd, ctypes.addressof(self._msgs) + held * size, want,
                            socket.MSG_DONTWAIT, None)
            if got < 0:
                code = ctypes.get_errno()
                if code in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR):
                    return
                raise OSError(code, os.strerror(code))
            rows = self._results[held:held + got]
            truncated = (rows["flags"] & socket.MSG_TRUNC) != 0
            length = rows["length"].astype(np.int64)
            self._length[held:held + got] = np.where(truncated, -1, length)
            self._held += got
            if got < want:
                return

    def _fill_recv_into(self, limit: int) -> None:
        recv_into, views, slot = self.sock.recv_into, self._views, self.slot_bytes
        trunc = socket.MSG_TRUNC
        held = self._held
        lengths: list[int] = []
        try:
            while held + len(lengths) < limit:
                lengths.append(recv_into(views[held + len(lengths)], slot, trunc))
        except (BlockingIOError, InterruptedError):
            pass
        finally:
            got = np.asarray(lengths, np.int64)
            self._length[held:held + len(got)] = np.where(got > slot, -1, got)
            self._held = held + len(got)

    def take(self) -> Received:
        """The held datagrams, in arrival order, and free the slots.

        The datagrams are copied out to rows as wide as the longest of them, so
        that parsing reads packed memory rather than one page per slot.
        """
        n, self._held = self._held, 0
        length = self._length[:n]
        ok = length >= 0
        width = -(-int(length.max(initial=0)) // 8) * 8
        packed = np.empty(n * width + PAD_BYTES, np.uint8)
        packed[n * width:] = 0
        rows = self._data[:n * self.slot_bytes].reshape(n, self.slot_bytes)[:, :width]
        packed[:n * width].reshape(n, width)[:] = rows
        start = np.arange(n, dtype=np.int64)[ok] * width
        return Received(Datagrams(packed, start, length[ok].copy()),
                        int(n - np.count_nonzero(ok)))

    def kernel_drops(self) -> int | None:
        """Datagrams the kernel has dropped for this socket since it was opened (its
        receive buffer was full), or None where the system does not tell (not Linux)."""
        if sys.platform != "linux":
            return None
        try:
            raw = self.sock.getsockopt(socket.SOL_SOCKET, _SO_MEMINFO_LINUX, _MEMINFO.size)
        except OSError:
            return None
        return int(_MEMINFO.unpack(raw)[-1]) if len(raw) == _MEMINFO.size else None

    def receive(self, limit: int | None = None) -> Received:
        """``fill`` then ``take``."""
        self.fill(limit)
        return self.take()


__all__ = ["HAS_RECVMMSG", "DatagramSocket", "ReceiveCall", "Received", "open_sockets"]
