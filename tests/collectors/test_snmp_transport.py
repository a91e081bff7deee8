"""The SNMPv2c client takes an answer only from the address and port it asked.

Real UDP sockets on loopback: a spoofer answers with the request-id in flight
from another port, and from the agent's port on another address (127.0.0.2);
both are ignored and counted, and the agent's own answer is the one returned.
"""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from fabricops.collectors.snmp import SnmpTarget
from fabricops.collectors.snmp_transport import PollError, V2cClient
from fabricops.core import snmp_mib as mib
from fabricops.core.inventory import SnmpCredentials
from fabricops.core.snmp_mib import SYS_NAME, Oid

from .snmp_messages import read_getbulk, response


def _answer(community: bytes, request_id: int, oids: list[Oid], value: bytes) -> bytes:
    return response(community, request_id, [((*o, 0), mib.ber_tlv(0x04, value)) for o in oids])


def _udp(host: str, port: int = 0) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, port))
    s.setblocking(False)
    return s


@pytest.fixture
def agent() -> Iterator[socket.socket]:
    s = _udp("127.0.0.1")
    yield s
    s.close()


async def _client(counts: Counter[str]) -> V2cClient:
    _, client = await asyncio.get_running_loop().create_datagram_endpoint(
        lambda: V2cClient(lambda: counts.update(["malformed"]),
                          lambda source, asked: counts.update(["foreign"]),
                          lambda: counts.update(["unmatched"])),
        local_addr=("127.0.0.1", 0))
    return client


async def _until(done: Callable[[], object], what: str) -> None:
    for _ in range(1000):  # up to 10 s: a guard, the datagrams are on loopback
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


def test_an_answer_from_another_port_or_address_is_ignored_and_counted(
    agent: socket.socket,
) -> None:
    port = agent.getsockname()[1]
    target = SnmpTarget(device="leaf-0", port=port, timeout_s=30.0, retries=0,
                        credentials=SnmpCredentials(community="leaf-0"))

    async def scenario() -> list[tuple[Oid, int | bytes | None]]:
        loop = asyncio.get_running_loop()
        counts: Counter[str] = Counter()
        client = await _client(counts)
        other_port, other_address = _udp("127.0.0.1"), _udp("127.0.0.2", port)
        try:
            poll = asyncio.ensure_future(client.bulk(target, [SYS_NAME.oid], 1, 0, tries=1))
            request, asker = await loop.sock_recvfrom(agent, 65535)
            community, rid, oids = read_getbulk(request)
            spoofed = _answer(community, rid, oids, b"spoofed")
            other_port.sendto(spoofed, asker)
            other_address.sendto(spoofed, asker)
            agent.sendto(_answer(community, rid + 1, oids, b"stray"), asker)
            agent.sendto(b"\x30\x03junk", asker)
            await _until(lambda: sum(counts.values()) == 4, f"4 datagrams counted: {counts}")
            assert not poll.done(), "no answer but the agent's is taken"
            assert counts == {"foreign": 2, "unmatched": 1, "malformed": 1}
            agent.sendto(_answer(community, rid, oids, b"leaf-0"), asker)
            return await asyncio.wait_for(poll, 10)
        finally:
            other_port.close()
            other_address.close()
            if client.transport is not None:
                client.transport.close()

    rows = asyncio.run(scenario())
    assert rows == [((*SYS_NAME.oid, 0), b"leaf-0")]


def test_a_late_answer_is_unmatched_not_foreign(agent: socket.socket) -> None:
    target = SnmpTarget(device="leaf-0", port=agent.getsockname()[1], timeout_s=0.05,
                        retries=0, credentials=SnmpCredentials(community="leaf-0"))

    async def scenario() -> Counter[str]:
        loop = asyncio.get_running_loop()
        counts: Counter[str] = Counter()
        client = await _client(counts)
        try:
            with pytest.raises(PollError, match="no answer in 1 tries"):
                await client.bulk(target, [SYS_NAME.oid], 1, 0, tries=1)
            request, asker = await loop.sock_recvfrom(agent, 65535)
            agent.sendto(_answer(*read_getbulk(request), b"leaf-0"), asker)
            await _until(lambda: counts, "the late answer is counted")
            return counts
        finally:
            if client.transport is not None:
                client.transport.close()

    assert asyncio.run(scenario()) == {"unmatched": 1}
