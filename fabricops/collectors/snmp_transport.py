"""Transport clients of the SNMP poller: one GETBULK or GETNEXT to a target, answer as rows.

SNMPv1 and SNMPv2c go through a small native client: one UDP socket for every
target, answers matched by request-id and by the address and port asked, parsed by
:mod:`fabricops.collectors.snmp_pdu` (pyasn1 decoding costs ~80 us per varbind, the
native parser ~1 us). SNMPv3 (USM) goes through pysnmp; its first request to a
target (engine discovery) gets ``engine_discovery_tries`` tries, so an agent slow
to answer it first is not taken for a dead one. Both raise :class:`PollError`
naming the target and the cause; an error-status answered by the agent is an
:class:`AgentError` carrying the status and index (the walk uses it: SNMPv1 ends a
GETNEXT walk with noSuchName).
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from pyasn1.type import univ
from pysnmp.carrier.asyncio.dgram import udp
from pysnmp.entity import config as snmp_config
from pysnmp.hlapi.v3arch.asyncio import (
    ContextData,
    ObjectIdentity,
    ObjectType,
    SnmpEngine,
    UdpTransportTarget,
    UsmUserData,
    bulk_cmd,
    next_cmd,
)
from pysnmp.proto import errind, rfc1905

from fabricops.collectors import snmp_decode as dec
from fabricops.collectors import snmp_pdu as pdu
from fabricops.core.snmp_mib import Oid

if TYPE_CHECKING:
    from fabricops.collectors.snmp_config import SnmpTarget

_AUTH = {"SHA": snmp_config.USM_AUTH_HMAC96_SHA, "SHA256": snmp_config.USM_AUTH_HMAC192_SHA256,
         "MD5": snmp_config.USM_AUTH_HMAC96_MD5}
_PRIV = {"AES": snmp_config.USM_PRIV_CFB128_AES, "AES256": snmp_config.USM_PRIV_CFB256_AES,
         "DES": snmp_config.USM_PRIV_CBC56_DES}
_EXCEPTIONS = (rfc1905.NoSuchObject.tagSet, rfc1905.NoSuchInstance.tagSet,
               rfc1905.EndOfMibView.tagSet)
_RCVBUF_BYTES = 8 << 20  # answers of many targets may arrive while one is parsed
Peer = tuple[str, int]  # IPv4 address, UDP port


class PollError(Exception):
    """A poll that failed; the message names the target and the cause."""

    def __init__(self, message: str, timeout: bool) -> None:
        super().__init__(message)
        self.timeout = timeout


class AgentError(PollError):
    """The agent answered with an error-status (``index``: 1-based varbind, 0 none)."""

    def __init__(self, message: str, status: int, index: int) -> None:
        super().__init__(message, False)
        self.status = status
        self.index = index


class V2cClient(asyncio.DatagramProtocol):
    """SNMPv2c GETBULK over one UDP socket for every target.

    An answer is taken only when its request-id is one in flight *and* it comes
    from the address and port that request went to, so a stray or spoofed answer
    never stands in for a device's. Any other datagram is ignored and counted:
    ``on_malformed`` (not an SNMPv2c response), ``on_foreign`` (a request-id in
    flight, from another address or port: called with that source and the
    address asked), ``on_unmatched`` (no such request in flight: a late answer to
    a try given up, or junk)."""

    def __init__(self, on_malformed: Callable[[], None],
                 on_foreign: Callable[[Peer, Peer], None] = lambda source, asked: None,
                 on_unmatched: Callable[[], None] = lambda: None) -> None:
        self.transport: asyncio.DatagramTransport | None = None
        self._pending: dict[int, tuple[asyncio.Future[dec.Response], Peer]] = {}
        self._next_id = random.randrange(1, 1 << 30)
        self._on_malformed = on_malformed
        self._on_foreign = on_foreign
        self._on_unmatched = on_unmatched
        self._addresses: dict[str, str] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RCVBUF_BYTES)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        try:
            response = dec.decode_response(data)
        except dec.SnmpDecodeError:
            self._on_malformed()
            return
        pending = self._pending.get(response.request_id)
        if pending is None:
            self._on_unmatched()
            return
        source = (str(addr[0]), int(addr[1]))
        if source != pending[1]:
            self._on_foreign(source, pending[1])
            return
        future = self._pending.pop(response.request_id)[0]
        if not future.done():
            future.set_result(response)

    def _peer(self, t: SnmpTarget) -> Peer:
        """The (IPv4 address, port) answers of ``t`` come from (names resolved once)."""
        address = self._addresses.get(t.host)
        if address is None:
            address = self._addresses[t.host] = socket.gethostbyname(t.host)
        return address, t.port

    async def bulk(self, t: SnmpTarget, oids: list[Oid], non_repeaters: int, reps: int,
                   tries: int, getnext: bool = False) -> list[dec.Row]:
        """One GETBULK (or GETNEXT) to ``t``; PollError if no answer in ``tries``,
        AgentError for an error-status."""
        assert self.transport is not None
        community = (t.credentials.community or "").encode()
        version = pdu.V1 if t.credentials.version == "v1" else pdu.V2C
        kind = pdu.GETNEXT if getnext or version == pdu.V1 else pdu.GETBULK
        for _ in range(tries):
            self._next_id = self._next_id % ((1 << 31) - 1) + 1
            rid = self._next_id
            future: asyncio.Future[dec.Response] = asyncio.get_running_loop().create_future()
            peer = self._peer(t)
            self._pending[rid] = (future, peer)
            self.transport.sendto(pdu.encode_request(version, community, rid, oids,
                                                     non_repeaters, reps, kind), peer)
            try:
                async with asyncio.timeout(t.timeout_s):
                    response = await future
            except TimeoutError:
                continue
            finally:
                self._pending.pop(rid, None)
            if response.error_status:
                raise AgentError(f"{t.where}: agent answered error-status "
                                 f"{response.error_status} at varbind {response.error_index}",
                                 response.error_status, response.error_index)
            return response.rows
        raise PollError(f"{t.where}: no answer in {tries} tries of {t.timeout_s} s", True)


class V3Client:
    """SNMPv3 (USM) GETBULK through pysnmp, one engine for every target."""

    def __init__(self) -> None:
        self.engine = SnmpEngine()
        self._peers: dict[str, tuple[Any, Any, Any, Any, Any]] = {}
        self._answered: set[str] = set()

    async def connect(self, t: SnmpTarget) -> None:
        """Credentials, context and transports (with and without retries) of ``t``."""
        c = t.credentials
        auth = UsmUserData(c.user, c.auth_key, c.priv_key, authProtocol=_AUTH[c.auth_protocol],
                           privProtocol=_PRIV[c.priv_protocol])
        context = ContextData(contextName=(c.context or "").encode())
        address = (t.host, t.port)
        self._peers[t.device] = (
            auth, context,
            await UdpTransportTarget.create(address, timeout=t.timeout_s, retries=t.retries),
            await UdpTransportTarget.create(address, timeout=t.timeout_s, retries=0),
            await UdpTransportTarget.create(
                address, timeout=t.timeout_s,
                retries=max(t.retries, t.engine_discovery_tries - 1)))

    def close(self) -> None:
        """Close the engine's socket first, so no late answer reaches a closed engine."""
        transport = snmp_config.get_transport(self.engine, udp.DOMAIN_NAME)
        if transport is not None:
            transport.close_transport()
        self.engine.close_dispatcher()

    async def bulk(self, t: SnmpTarget, oids: list[Oid], non_repeaters: int, reps: int,
                   tries: int, getnext: bool = False) -> list[dec.Row]:
        """One GETBULK (or GETNEXT) to ``t``; the first one to ``t`` discovers its engine."""
        auth, context, transport, once, discovery = self._peers[t.device]
        first = t.device not in self._answered
        if first:
            transport, once = discovery, discovery
            tries = max(tries, t.engine_discovery_tries)
        objects = [ObjectType(ObjectIdentity(oid)) for oid in oids]
        target = transport if tries > 1 else once
        try:
            if getnext:
                ind, status, index, varbinds = await next_cmd(
                    self.engine, auth, target, context, *objects, lookupMib=False)
            else:
                ind, status, index, varbinds = await bulk_cmd(
                    self.engine, auth, target, context, non_repeaters, reps, *objects,
                    lookupMib=False)
        except Exception as exc:  # pysnmp raises for unusable responses; named here
            raise PollError(f"{t.where}: {type(exc).__name__}: {exc}", False) from exc
        if ind:
            timeout = isinstance(ind, errind.RequestTimedOut)
            cause = f"no answer in {tries} tries of {t.timeout_s} s" if timeout else str(ind)
            raise PollError(f"{t.where}: {cause}", timeout)
        self._answered.add(t.device)
        if status:
            raise AgentError(f"{t.where}: agent answered {status.prettyPrint()} at "
                             f"varbind {int(index)}", int(status), int(index))
        return [(tuple(name), _plain(value)) for name, value in varbinds]


def _plain(value: Any) -> int | bytes | None:
    """A response value as int or bytes; None for exceptions and other types."""
    if value.tagSet in _EXCEPTIONS:
        return None
    if isinstance(value, univ.Integer):
        return int(value)
    if isinstance(value, univ.OctetString):
        return bytes(value.asOctets())
    return None


__all__ = ["AgentError", "PollError", "V2cClient", "V3Client"]
