"""Walks against agents that answer short, stop early or refuse; per-target settings.

``RecordedAgent`` answers GETBULK and GETNEXT from a recorded walk as a pure
function (no sockets), so the walk's requests can be inspected one by one; the
SNMPv3 tests use a real snmpsim agent.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from bisect import bisect_right
from collections.abc import Iterator

import pytest
from pyasn1.codec.ber.encoder import encode as ber_encode
from pysnmp.proto import rfc1902
from pysnmp.proto.api import v1 as api_v1

from fabricops.collectors import snmp_decode as dec
from fabricops.collectors import snmp_pdu as pdu
from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, SnmpTarget
from fabricops.collectors.snmp_config import targets_from_inventory
from fabricops.collectors.snmp_transport import AgentError, PollError
from fabricops.collectors.snmp_walk import WalkLimits, WalkStats, walk
from fabricops.core import snmp_mib as mib
from fabricops.core.inventory import InventoryError, SnmpCredentials, inventory_from_dict
from fabricops.core.sinks import ListSink
from tests.collectors.quirk_walks import C64
from tests.collectors.snmprec import (
    WALKS,
    Record,
    SimAgent,
    format_record,
    parse_snmprec,
    read_snmprec,
    snmpsim_agent,
    tables_of,
)

COLUMNS = (*dec.STATIC_COLUMNS, *dec.DYNAMIC_COLUMNS)


class RecordedAgent:
    """GETBULK/GETNEXT over ``records``: answers cut after ``cap`` varbinds, SNMPv1
    (noSuchName past the end or at a Counter64), tooBig above ``too_big_over``."""

    def __init__(self, records: list[Record], cap: int | None = None, v1: bool = False,
                 too_big_over: int | None = None, error: int = 0) -> None:
        self.records = sorted(records, key=lambda r: r.oid)
        self.oids = [r.oid for r in self.records]
        self.cap, self.v1, self.too_big_over, self.error = cap, v1, too_big_over, error
        self.sent: list[mib.Oid] = []  # every instance answered, in order
        self.requests: list[list[mib.Oid]] = []
        self.answered: set[mib.Oid] = set()  # OIDs asked whose rows were sent
        self.asked_again = 0  # asked for rows that were already sent

    def next(self, oid: mib.Oid) -> Record | None:
        at = bisect_right(self.oids, oid)
        return self.records[at] if at < len(self.records) else None

    async def __call__(self, oids: list[mib.Oid], non_repeaters: int, reps: int,
                       getnext: bool) -> list[pdu.Row]:
        self.requests.append(list(oids))
        if self.error:
            raise AgentError("agent answered genErr", self.error, 1)
        if getnext or self.v1:
            return self._getnext(oids)
        if self.too_big_over and non_repeaters + reps * (len(oids) - non_repeaters) > \
                self.too_big_over:
            raise AgentError("agent answered tooBig", pdu.TOO_BIG, 0)
        rows = [self._row(o) for o in oids[:non_repeaters]]
        cursor = oids[non_repeaters:]
        self.asked_again += len(self.answered.intersection(cursor))
        for _ in range(reps):
            cursor_rows = [self._row(o) for o in cursor]
            rows += cursor_rows
            cursor = [r[0] for r in cursor_rows]
        rows = rows[:self.cap] if self.cap else rows
        repeated = max(0, len(rows) - non_repeaters)
        self.answered.update(oids[non_repeaters:non_repeaters + repeated])
        return self._sent(rows)

    def _getnext(self, oids: list[mib.Oid]) -> list[pdu.Row]:
        rows = []
        for i, oid in enumerate(oids, 1):
            found = self.next(oid)
            if self.v1 and (found is None or found.tag == C64):
                raise AgentError("noSuchName", pdu.NO_SUCH_NAME, i)
            rows.append(self._row(oid))
        return self._sent(rows)

    def _row(self, oid: mib.Oid) -> pdu.Row:
        found = self.next(oid)
        return (oid, None) if found is None else (found.oid, found.value)

    def _sent(self, rows: list[pdu.Row]) -> list[pdu.Row]:
        self.sent += [oid for oid, value in rows if value is not None]
        return rows


def run_walk(agent: RecordedAgent, limits: WalkLimits | None = None
             ) -> tuple[dict[mib.Oid, dict[mib.Oid, int | bytes]], WalkStats]:
    return asyncio.run(walk(agent, COLUMNS, dec.DESCRIBE_SCALARS, limits or WalkLimits()))


@pytest.mark.parametrize("cap", [1, 7, 32, 64])
def test_short_answers_are_walked_to_the_end_without_asking_again(cap: int) -> None:
    records = read_snmprec(WALKS / "quirk_capped.snmprec")
    agent = RecordedAgent(records, cap=cap)
    tables, stats = run_walk(agent)
    assert tables == tables_of(records, (*dec.DESCRIBE_SCALARS, *COLUMNS))
    assert agent.asked_again == 0  # no row the agent sent was asked for again
    instances = sum(len(rows) for rows in tables.values())
    assert stats.varbinds_received <= 2 * instances + cap * len(COLUMNS)


def test_snmpv1_getnext_walk_ends_columns_on_no_such_name() -> None:
    records = read_snmprec(WALKS / "quirk_v1.snmprec")
    agent = RecordedAgent(records, v1=True)
    tables, _ = run_walk(agent, WalkLimits(getnext=True))
    v1_view = [r for r in records if r.tag != C64]
    assert tables == tables_of(v1_view, (*dec.DESCRIBE_SCALARS, *COLUMNS))
    assert tables[mib.IF_IN_OCTETS.oid]
    assert not tables[mib.IF_HC_IN_OCTETS.oid]
    assert all(len(r) == len(agent.requests[0]) - k for k, r in enumerate(agent.requests[:1]))


def test_too_big_halves_the_request_and_other_errors_fail_the_poll() -> None:
    records = read_snmprec(WALKS / "quirk_counter32.snmprec")
    tables, _ = run_walk(RecordedAgent(records, too_big_over=40))
    assert tables == tables_of(records, (*dec.DESCRIBE_SCALARS, *COLUMNS))
    with pytest.raises(PollError, match="genErr"):
        run_walk(RecordedAgent(records, error=5))
    with pytest.raises(PollError, match="more than 3 rows"):
        run_walk(RecordedAgent(records), WalkLimits(max_rows_per_column=3))


# --- messages and recorded files: garbage and truncation --------------------------------

def test_snmpv1_responses_decode_and_truncated_ones_are_decode_errors() -> None:
    response = api_v1.apiPDU.get_response(api_v1.GetNextRequestPDU())
    api_v1.apiPDU.set_request_id(response, 99)
    api_v1.apiPDU.set_error_status(response, 2)
    api_v1.apiPDU.set_error_index(response, 1)
    api_v1.apiPDU.set_varbinds(response, [((1, 3, 6, 1, 2, 1, 2, 2, 1, 10, 1),
                                           rfc1902.Counter32(2**32 - 1))])
    message = api_v1.Message()
    api_v1.apiMessage.set_defaults(message)
    api_v1.apiMessage.set_community(message, b"public")
    api_v1.apiMessage.set_pdu(message, response)
    data = ber_encode(message)
    got = pdu.decode_response(data)
    assert (got.version, got.request_id, got.error_status, got.error_index) == (0, 99, 2, 1)
    assert got.rows == [((1, 3, 6, 1, 2, 1, 2, 2, 1, 10, 1), 2**32 - 1)]
    for cut in range(len(data)):
        with pytest.raises(pdu.SnmpDecodeError):
            pdu.decode_response(data[:cut])
    with pytest.raises(pdu.SnmpDecodeError, match="neither SNMPv1 nor SNMPv2c"):
        pdu.decode_response(data.replace(b"\x02\x01\x00", b"\x02\x01\x03", 1))


def test_snmprec_lines_round_trip_and_bad_lines_are_named() -> None:
    records = [Record((1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1, 1), 4, b"lo0\x00"),
               Record((1, 3, 6, 1, 2, 1, 1, 2, 0), 6, mib.ber_oid((1, 3, 6, 1, 4, 1, 9))[2:]),
               Record((1, 3, 6, 1, 2, 1, 1, 3, 0), 67, 5)]
    text = "".join(format_record(r) + "\n" for r in records)
    assert "4x|6c6f3000" in text
    assert "|6|1.3.6.1.4.1.9" in text
    assert parse_snmprec(text) == records
    for bad in ("1.3.6.1|2|twelve", "1.3.6.1|4", "1.3.x.1|2|1", "1.3.6.1|4x|zz"):
        with pytest.raises(ValueError, match=r"walk:2: "):
            parse_snmprec("1.3.6.1.1|2|1\n" + bad + "\n", "walk")


# --- per-target settings from the inventory ---------------------------------------------

def test_transport_settings_come_from_each_inventory_entry() -> None:
    inv = inventory_from_dict({"targets": [
        {"device": "old", "protocol": "snmp", "address": "10.0.0.1:161",
         "snmp": {"version": "v1", "community": "c", "timeout_s": 4, "retries": 3,
                  "max_varbinds_per_request": 32, "port_name": "{ifDescr}"}},
        {"device": "new", "protocol": "snmp", "address": "10.0.0.2:161",
         "snmp": {"version": "v2c", "community": "c", "walk": "getnext",
                  "max_repetitions": 10}}]})
    old, new = targets_from_inventory(inv)
    assert (old.timeout_s, old.retries, old.max_varbinds_per_request) == (4, 3, 32)
    assert old.getnext
    assert old.port_name == "{ifDescr}"
    assert new.getnext
    assert new.max_repetitions == 10
    assert new.timeout_s == 1.0


@pytest.mark.parametrize(("snmp", "named"), [
    ({"version": "v1", "community": "c", "walk": "getbulk"},
     "targets[0].snmp: walk: SNMPv1 has no GETBULK"),
    ({"community": "c", "timeout": 2}, "targets[0].snmp.timeout: unknown key (did you mean "
                                       "'timeout_s'?)"),
    ({"community": "c", "port_name": "{ifNme}"}, "targets[0].snmp.port_name: template"),
    ({"community": "c", "max_repetitions": 0}, "targets[0].snmp.max_repetitions:"),
    ({"community": "c", "walk": "getbulkk"}, "targets[0].snmp.walk:"),
])
def test_inventory_errors_are_one_line_naming_entry_and_key(snmp: dict[str, object],
                                                           named: str) -> None:
    with pytest.raises(InventoryError) as caught:
        inventory_from_dict({"targets": [{"device": "x", "protocol": "snmp",
                                          "address": "10.0.0.1:161", "snmp": snmp}]})
    assert named in str(caught.value)
    assert "\n" not in str(caught.value)


# --- SNMPv3 over a real agent -----------------------------------------------------------

SIMULATOR_V3 = {"version": "v3", "user": "simulator", "auth_key": "auctoritas",
                "auth_protocol": "MD5", "priv_key": "privatus", "priv_protocol": "DES"}


@pytest.fixture
def slow_first_answer() -> Iterator[tuple[SimAgent, int]]:
    """snmpsim behind a relay that drops the first datagram (a slow discovery answer)."""
    with snmpsim_agent(WALKS) as agent:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(0.2)
        upstream = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        upstream.settimeout(3)
        stop, seen = threading.Event(), [0]

        def relay() -> None:
            while not stop.is_set():
                try:
                    data, client = sock.recvfrom(65535)
                except OSError:
                    continue
                seen[0] += 1
                if seen[0] > 1:
                    upstream.sendto(data, (agent.host, agent.port))
                    sock.sendto(upstream.recvfrom(65535)[0], client)

        thread = threading.Thread(target=relay, daemon=True)
        thread.start()
        yield agent, int(sock.getsockname()[1])
        stop.set()
        thread.join()
        sock.close()
        upstream.close()


@pytest.mark.parametrize("discovery_tries", [1, 3])
def test_snmpv3_context_picks_the_device_and_discovery_outlasts_a_slow_first_answer(
        slow_first_answer: tuple[SimAgent, int], discovery_tries: int) -> None:
    _, port = slow_first_answer
    credentials = SnmpCredentials.model_validate({**SIMULATOR_V3, "context": "quirk_nul_name"})
    target = SnmpTarget(device="sw", port=port, credentials=credentials, timeout_s=1.0,
                        retries=0, engine_discovery_tries=discovery_tries)
    sink = ListSink()
    poller = SnmpPoller(SnmpPollerConfig(targets=(target,)), sink)
    poller.start(schedule=False)
    try:
        status = poller.collect_once()["sw"]
    finally:
        poller.stop()
    if discovery_tries == 1:
        assert not status.up
        assert "no answer" in status.last_error
        return
    assert status.up, status.last_error
    assert set(sink.frames[0].entities) == {f"sw:Ethernet{i}" for i in range(1, 5)}


def test_snmpv3_walks_with_getnext_when_the_inventory_says_so() -> None:
    credentials = SnmpCredentials.model_validate({**SIMULATOR_V3, "context": "quirk_nul_name"})
    with snmpsim_agent(WALKS) as agent:
        target = SnmpTarget(device="sw", port=agent.port, credentials=credentials,
                            timeout_s=3.0, walk="getnext")
        sink = ListSink()
        poller = SnmpPoller(SnmpPollerConfig(targets=(target,)), sink)
        poller.start(schedule=False)
        try:
            statuses = [poller.collect_once()["sw"] for _ in range(2)]
        finally:
            poller.stop()
    assert all(s.up for s in statuses), statuses
    walked = statuses[1].last_walk
    assert walked is not None
    assert walked.requests == 5  # four rows and the end, every column at once
    assert set(sink.frames[1].entities) == {f"sw:Ethernet{i}" for i in range(1, 5)}
