"""SNMPv3 USM messages: RFC keys, authenticated and encrypted round trips, bad datagrams."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabricops.collectors import snmp_pdu as pdu
from fabricops.collectors import snmp_usm as usm
from fabricops.collectors.snmp_config import SnmpTarget
from fabricops.collectors.snmp_transport import PollError
from fabricops.collectors.snmp_usm_client import UsmClient, supports
from fabricops.core import snmp_mib as mib
from fabricops.core.inventory import SnmpCredentials
from tests.collectors.snmprec import free_udp_port
from tests.conftest import missing_peer, require_program

ENGINE = usm.Engine(bytes.fromhex("80001f8880e9630000d61ff449"), 3, 1234)
KEYS = usm.localized_keys("SHA", "fabricops-auth", "fabricops-priv", ENGINE.engine_id)


def test_keys_are_localized_as_rfc_3414_appendix_a_3_says() -> None:
    engine = bytes.fromhex("000000000000000000000002")
    sha = usm.localized_keys("SHA", "maplesyrup", "maplesyrup", engine)
    md5 = usm.localized_keys("MD5", "maplesyrup", "maplesyrup", engine)
    assert sha.auth_key.hex() == "6695febc9288e36282235fc7151f128497b38f3f"
    assert md5.auth_key.hex() == "526f5eed9fcce26f8964c2930787d82b"
    assert sha.priv_key == sha.auth_key[:16]  # AES-128 takes the first 16 octets


def response_pdu(request_id: int, rows: list[tuple[mib.Oid, int]], tag: int = pdu.RESPONSE
                 ) -> bytes:
    varbinds = b"".join(mib.ber_tlv(0x30, mib.ber_oid(o) + mib.ber_value(mib.Syntax.INTEGER, v))
                        for o, v in rows)
    head = b"".join(mib.ber_value(mib.Syntax.INTEGER, v) for v in (request_id, 0, 0))
    return mib.ber_tlv(tag, head + mib.ber_tlv(0x30, varbinds))


def agent_answer(rows: list[tuple[mib.Oid, int]], keys: usm.UsmKeys | None = KEYS,
                 tag: int = pdu.RESPONSE) -> bytes:
    return usm.encode_request(41, "fabricops", ENGINE, b"leaf-0", response_pdu(7, rows, tag),
                              keys, 99)


def keys_of(engine_id: bytes) -> usm.UsmKeys | None:
    return KEYS if engine_id == ENGINE.engine_id else None


def test_an_authenticated_encrypted_answer_decodes_to_its_rows() -> None:
    rows = [((1, 3, 6, 1, 2, 1, 2, 2, 1, 8, 1), 1), ((1, 3, 6, 1, 2, 1, 2, 2, 1, 8, 2), 2)]
    data = agent_answer(rows)
    assert b"leaf-0" not in data  # the scoped PDU (context name included) is encrypted
    got = usm.decode_message(data, keys_of)
    assert (got.msg_id, got.engine, got.authenticated, got.report) == (41, ENGINE, True, None)
    assert got.response.rows == rows
    assert usm.message_id(data) == 41


def test_requests_differ_by_salt_and_carry_a_valid_mac() -> None:
    body = usm.encode_pdu(pdu.GETBULK, 5, [(1, 3, 6, 1)], 0, 10)
    a = usm.encode_request(1, "fabricops", ENGINE, b"", body, KEYS, 1)
    b = usm.encode_request(1, "fabricops", ENGINE, b"", body, KEYS, 2)
    assert a != b
    assert len(a) == len(b)


def test_a_discovery_report_needs_no_keys() -> None:
    report = agent_answer([(usm.UNKNOWN_ENGINE_ID, 1)], keys=None, tag=usm.REPORT)
    got = usm.decode_message(report, lambda engine_id: None)
    assert got.report == usm.UNKNOWN_ENGINE_ID
    assert got.engine == ENGINE
    assert not got.authenticated


@pytest.mark.parametrize("case", ["wrong_mac", "other_keys", "unauthenticated_response",
                                  "unknown_engine", "not_v3", "bad_pdu_tag"])
def test_answers_that_cannot_be_trusted_are_refused(case: str) -> None:
    rows = [((1, 3, 6, 1, 2, 1, 1, 3, 0), 5)]
    data = bytearray(agent_answer(rows))
    lookup = keys_of
    if case == "wrong_mac":
        data[-1] ^= 0x01  # one bit of the ciphertext: the HMAC no longer matches
    elif case == "other_keys":
        other = usm.localized_keys("SHA", "another-pass", "another-pass", ENGINE.engine_id)
        lookup = lambda engine_id: other  # noqa: E731
    elif case == "unauthenticated_response":
        data = bytearray(agent_answer(rows, keys=None))
    elif case == "unknown_engine":
        lookup = lambda engine_id: None  # noqa: E731
    elif case == "not_v3":
        data[data.index(b"\x02\x01\x03") + 2] = 1  # msgVersion 1
    else:
        data = bytearray(agent_answer(rows, tag=0xA0))  # a GetRequest is no answer
    with pytest.raises(usm.UsmError):
        usm.decode_message(bytes(data), lookup)


def test_every_truncation_and_garbage_is_an_error_never_a_crash() -> None:
    data = agent_answer([((1, 3, 6, 1, 2, 1, 1, 3, 0), 5)])
    for n in range(len(data)):
        with pytest.raises(usm.UsmError):
            usm.decode_message(data[:n], keys_of)
    for junk in (b"", b"\x30", b"\x30\x84\xff\xff\xff\xff", bytes(range(256)), b"\x00" * 64):
        with pytest.raises(usm.UsmError):
            usm.decode_message(junk, keys_of)
        with pytest.raises(usm.UsmError):
            usm.message_id(junk)


async def _bulk(client_target: SnmpTarget, oids: list[mib.Oid]) -> list[pdu.Row]:
    client = await UsmClient.open()
    try:
        return await client.bulk(client_target, oids, 0, 5, 2)
    finally:
        client.close()


@pytest.fixture
def snmpd_v3(tmp_path: Path) -> Iterator[int]:
    """net-snmp's snmpd with an authPriv SHA/AES user, on a free loopback port."""
    snmpd = require_program("snmpd", "as an SNMPv3 agent other than the project's own")
    port = free_udp_port()
    conf = tmp_path / "snmpd.conf"
    conf.write_text(f"agentAddress udp:127.0.0.1:{port}\n"
                    "createUser fabricops SHA fabricops-auth AES fabricops-priv\n"
                    "rouser fabricops priv\n")
    tmp_path.chmod(0o777)
    args = [snmpd, "-f", "-C", "-c", str(conf), "-Lf", str(tmp_path / "log"),
            f"--persistentDir={tmp_path}"]
    if os.geteuid() == 0:
        args += ["-u", "nobody", "-g", "nogroup"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        if proc.poll() is not None:
            missing_peer(f"snmpd did not start: {(tmp_path / 'log').read_text()[-400:]}")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def v3_target(port: int, **keys: str) -> SnmpTarget:
    creds = {"version": "v3", "user": "fabricops", "auth_key": "fabricops-auth",
             "priv_key": "fabricops-priv"} | keys
    return SnmpTarget(device="sw", port=port, timeout_s=2.0, retries=1,
                      credentials=SnmpCredentials(**creds))  # type: ignore[arg-type]


def test_the_native_client_reads_net_snmp_s_snmpd_over_v3(snmpd_v3: int) -> None:
    """Discovery, time synchronisation, SHA and AES-128 as another implementation does."""
    rows = asyncio.run(_bulk(v3_target(snmpd_v3), [mib.SYS_NAME.oid[:-1]]))
    assert rows
    assert rows[0][0][:8] == (1, 3, 6, 1, 2, 1, 1, 1)  # sysDescr.0 and on


def test_wrong_keys_are_a_poll_error_naming_the_report(snmpd_v3: int) -> None:
    with pytest.raises(PollError, match=r"reported 1\.3\.6\.1\.6\.3\.15\.1\.1\."):
        asyncio.run(_bulk(v3_target(snmpd_v3, auth_key="not-the-auth-key"),
                          [mib.SYS_NAME.oid[:-1]]))


def test_protocols_it_does_not_speak_go_through_pysnmp() -> None:
    assert supports(v3_target(1))
    assert not supports(v3_target(1, priv_protocol="AES256"))
    assert not supports(v3_target(1, priv_protocol="DES"))


class ClockJumpAgent(asyncio.DatagramProtocol):
    """A scripted agent: discovery report, then 'not in time window' (its clock is
    far ahead of what discovery said), then the answer; it records what it got."""

    ENGINE = usm.Engine(b"\x80\x00\x1f\x88\x04fake-agent", 7, 100)

    def __init__(self) -> None:
        self.transport: asyncio.DatagramTransport | None = None
        self.keys = usm.localized_keys("SHA", "fabricops-auth", "fabricops-priv",
                                       self.ENGINE.engine_id)
        self.got = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        assert self.transport is not None
        msg_id, self.got = usm.message_id(data), self.got + 1
        later = usm.Engine(self.ENGINE.engine_id, 7, 5000)
        if self.got == 1:
            reply = usm.encode_request(msg_id, "", self.ENGINE, b"", response_pdu(
                msg_id, [(usm.UNKNOWN_ENGINE_ID, 1)], usm.REPORT), None, 0)
        elif self.got == 2:
            reply = usm.encode_request(msg_id, "fabricops", later, b"", response_pdu(
                msg_id, [(usm.NOT_IN_TIME_WINDOW, 1)], usm.REPORT), self.keys, 1)
        else:
            reply = usm.encode_request(msg_id, "fabricops", later, b"", response_pdu(
                msg_id, [((1, 3, 6, 1, 2, 1, 1, 3, 0), 42)]), self.keys, 2)
        self.transport.sendto(reply, addr)


def test_the_client_discovers_then_resynchronises_a_clock_that_jumped() -> None:
    async def scenario() -> tuple[list[pdu.Row], int]:
        loop = asyncio.get_running_loop()
        transport, agent = await loop.create_datagram_endpoint(
            ClockJumpAgent, local_addr=("127.0.0.1", 0))
        try:
            port = transport.get_extra_info("sockname")[1]
            rows = await _bulk(v3_target(port), [(1, 3, 6, 1, 2, 1, 1, 3)])
        finally:
            transport.close()
        return rows, agent.got

    rows, messages = asyncio.run(scenario())
    assert rows == [((1, 3, 6, 1, 2, 1, 1, 3, 0), 42)]
    assert messages == 3  # probe, the request refused for its time, the request again
