"""SNMPv3 authPriv GETBULK/GETNEXT over one UDP socket, natively (no pysnmp engine).

:class:`UsmClient` has the shape of the poller's other clients (``connect``,
``bulk``, ``close``) and speaks the messages of
:mod:`fabricops.collectors.snmp_usm`. Per target it discovers the agent's engine
(id, boots, time) with one noAuthNoPriv probe, given ``engine_discovery_tries``
tries, and keeps the keys localized to that engine; each request then costs two
HMACs and one AES pass. The engine clock is carried forward from the last
authenticated answer; a usmStatsNotInTimeWindows report resynchronises it and an
usmStatsUnknownEngineIDs report (the agent restarted with another id)
rediscovers, each followed by one more try. An answer is taken only from the
address and port asked, with a msgID in flight, and only if its HMAC checks;
anything else is counted (``on_malformed``, ``on_unmatched``) and ignored.

Targets whose protocols it does not implement (``supports`` is False: AES-256,
DES) go through pysnmp (:class:`fabricops.collectors.snmp_transport.V3Client`).
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from fabricops.collectors import snmp_pdu as pdu
from fabricops.collectors import snmp_usm as usm
from fabricops.collectors.snmp_transport import AgentError, Peer, PollError

if TYPE_CHECKING:
    from fabricops.collectors.snmp_config import SnmpTarget
    from fabricops.core.snmp_mib import Oid

_GET = 0xA0
_RCVBUF_BYTES = 8 << 20


@dataclass
class _Agent:
    """What a target's agent told us: its engine, when, and our keys there."""

    engine: usm.Engine
    synced_at: float
    keys: usm.UsmKeys

    def now(self) -> usm.Engine:
        """The engine with its clock carried forward to now."""
        e = self.engine
        return usm.Engine(e.engine_id, e.boots, e.time + int(time.monotonic() - self.synced_at))


def supports(t: SnmpTarget) -> bool:
    """True if this client speaks ``t``'s authentication and privacy protocols."""
    c = t.credentials
    return c.auth_protocol in usm.AUTH and c.priv_protocol in usm.PRIV


class UsmClient(asyncio.DatagramProtocol):
    """SNMPv3 authPriv requests to many targets over one UDP socket (module docstring)."""

    def __init__(self, on_malformed: Callable[[], None] = lambda: None,
                 on_unmatched: Callable[[], None] = lambda: None) -> None:
        self.transport: asyncio.DatagramTransport | None = None
        self._pending: dict[int, tuple[asyncio.Future[usm.UsmResponse], Peer,
                                       Callable[[bytes], usm.UsmKeys | None]]] = {}
        self._agents: dict[str, _Agent] = {}
        self._addresses: dict[str, str] = {}
        self._next_id = random.randrange(1, 1 << 30)
        self._salt = usm.new_salt()
        self._on_malformed = on_malformed
        self._on_unmatched = on_unmatched

    @classmethod
    async def open(cls, **callbacks: Callable[[], None]) -> UsmClient:
        """A client bound to an ephemeral UDP port on the running loop."""
        _, client = await asyncio.get_running_loop().create_datagram_endpoint(
            lambda: cls(**callbacks), family=socket.AF_INET)
        return client

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RCVBUF_BYTES)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        try:
            msg_id = usm.message_id(data)
        except usm.UsmError:
            self._on_malformed()
            return
        pending = self._pending.get(msg_id)
        if pending is None or (str(addr[0]), int(addr[1])) != pending[1]:
            self._on_unmatched()
            return
        try:
            answer = usm.decode_message(data, pending[2])
        except usm.UsmError:
            self._on_malformed()
            return
        future = self._pending.pop(msg_id)[0]
        if not future.done():
            future.set_result(answer)

    async def connect(self, t: SnmpTarget) -> None:
        """Nothing to do before the first request (discovery happens then)."""

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def bulk(self, t: SnmpTarget, oids: list[Oid], non_repeaters: int, reps: int,
                   tries: int, getnext: bool = False) -> list[pdu.Row]:
        """One GETBULK (or GETNEXT) to ``t``; PollError names what failed."""
        agent = self._agents.get(t.device)
        if agent is None:
            agent = await self._discover(t, max(tries, t.engine_discovery_tries))
        kind = pdu.GETNEXT if getnext else pdu.GETBULK
        for _ in range(2):  # one more try after a resync or a rediscovery
            self._next_id = self._next_id % ((1 << 31) - 1) + 1
            rid = self._next_id
            body = usm.encode_pdu(kind, rid, oids, non_repeaters, reps)
            answer = await self._exchange(t, rid, body, agent, tries)
            if answer.report == usm.NOT_IN_TIME_WINDOW and answer.authenticated:
                agent.engine, agent.synced_at = answer.engine, time.monotonic()
                continue
            if answer.report == usm.UNKNOWN_ENGINE_ID:
                del self._agents[t.device]
                agent = await self._discover(t, tries)
                continue
            if answer.report is not None:
                oid = ".".join(map(str, answer.report))
                raise PollError(f"{t.where}: agent reported {oid} (SNMPv3 user, keys or "
                                "context refused)", False)
            agent.engine, agent.synced_at = answer.engine, time.monotonic()
            r = answer.response
            if r.request_id != rid:
                raise PollError(f"{t.where}: answer to request-id {r.request_id}, "
                                f"not {rid}", False)
            if r.error_status:
                raise AgentError(f"{t.where}: agent answered error-status {r.error_status} "
                                 f"at varbind {r.error_index}", r.error_status, r.error_index)
            return r.rows
        raise PollError(f"{t.where}: SNMPv3 engine clock or id kept changing", False)

    async def _discover(self, t: SnmpTarget, tries: int) -> _Agent:
        """Learn the agent's engine id, boots and time; localize the keys to it."""
        self._next_id = self._next_id % ((1 << 31) - 1) + 1
        probe = usm.encode_pdu(_GET, self._next_id, [])
        answer = await self._exchange(t, self._next_id, probe, None, tries)
        if not answer.engine.engine_id:
            raise PollError(f"{t.where}: SNMPv3 discovery answer without an engine id", False)
        c = t.credentials
        keys = usm.localized_keys(c.auth_protocol, c.auth_key or "", c.priv_key or "",
                                  answer.engine.engine_id)
        agent = self._agents[t.device] = _Agent(answer.engine, time.monotonic(), keys)
        return agent

    async def _exchange(self, t: SnmpTarget, msg_id: int, body: bytes, agent: _Agent | None,
                        tries: int) -> usm.UsmResponse:
        """Send ``body`` (authPriv, or the discovery probe without an agent) and wait."""
        assert self.transport is not None
        peer = self._peer(t)
        context = (t.credentials.context or "").encode()
        user = t.credentials.user or ""
        keys = agent.keys if agent is not None else None

        def keys_of(engine_id: bytes) -> usm.UsmKeys | None:
            return keys if agent is not None and engine_id == agent.engine.engine_id else None

        for _ in range(tries):
            engine = agent.now() if agent is not None else usm.Engine()
            self._salt = (self._salt + 1) & ((1 << 64) - 1)
            message = usm.encode_request(msg_id, user, engine, context, body, keys, self._salt)
            future: asyncio.Future[usm.UsmResponse] = \
                asyncio.get_running_loop().create_future()
            self._pending[msg_id] = (future, peer, keys_of)
            self.transport.sendto(message, peer)
            try:
                async with asyncio.timeout(t.timeout_s):
                    return await future
            except TimeoutError:
                continue
            finally:
                self._pending.pop(msg_id, None)
        raise PollError(f"{t.where}: no answer in {tries} tries of {t.timeout_s} s", True)

    def _peer(self, t: SnmpTarget) -> Peer:
        address = self._addresses.get(t.host)
        if address is None:
            address = self._addresses[t.host] = socket.gethostbyname(t.host)
        return address, t.port


__all__ = ["UsmClient", "supports"]
