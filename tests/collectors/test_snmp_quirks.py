"""Agents the way real devices are: every port gets an id, every counter its rate.

The quirk walks (``tests/collectors/walks/quirk_*.snmprec``, made by
``tests.collectors.quirk_walks``) are served by a real snmpsim agent over UDP on
loopback. The value changes between polls (a 32-bit wrap, a restart) are served
by restarting snmpsim on the same port with the next poll's data directory; the
agent that answers at most 32 varbinds is snmpsim with its GETBULK answers cut
after 32 varbinds (see ``snmprec.snmpsim_agent``). The same files are replayed
into the decoder as pure functions too.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.collectors import snmp_decode as dec
from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, SnmpTarget
from fabricops.collectors.snmp_counters import Clocks, Discontinuity
from fabricops.core import snmp_mib as mib
from fabricops.core.catalogue import CATALOGUE, MetricKind
from fabricops.core.frame import Frame
from fabricops.core.inventory import SnmpCredentials
from fabricops.core.sinks import ListSink
from tests.collectors.quirk_walks import C64, later_poll, quirk_walks
from tests.collectors.snmprec import (
    WALKS,
    Record,
    SimAgent,
    read_snmprec,
    snmpsim_agent,
    tables_of,
    write_snmprec,
)

DELTA = 300_000_000  # per poll, on every counter: past 2**32 for the 32-bit ones
EXPECTED_IDS = {
    "quirk_no_ifname": {1: "ge-0/0/0", 2: "ge-0/0/1", 3: "uplink-3", 4: "ifIndex-4"},
    "quirk_counter32": {i: f"Ethernet{i}" for i in range(1, 5)},
    "quirk_duplicate_names": {1: "lo0", 2: "et-0/0/0", 3: "et-0/0/1", 5: "lo0#5",
                              6: "lo0#5#6"},
    "quirk_nul_name": {i: f"Ethernet{i}" for i in range(1, 5)},
    "quirk_capped": {i: f"Ethernet{i}/1" for i in range(1, 49)},
    "quirk_v1": {i: f"port {i}" for i in range(1, 7)},
}
VALUE_COLUMNS = {c.name for c in (*dec.DYNAMIC_COLUMNS, *dec.SCALARS)}
DESCRIPTION_ONLY = {c.name for c in dec.STATIC_COLUMNS} - VALUE_COLUMNS


def quirk_dirs(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """Data directories of poll 1 and poll 2 of quirk agent ``name``."""
    records = read_snmprec(WALKS / f"{name}.snmprec")
    first, second = tmp_path / "poll1", tmp_path / "poll2"
    write_snmprec(first / f"{name}.snmprec", records)
    write_snmprec(second / f"{name}.snmprec", later_poll(records, DELTA))
    return first, second


def poller_for(agent: SimAgent, community: str, version: str = "v2c",
               **settings: object) -> tuple[SnmpPoller, ListSink, CollectorRegistry]:
    target = SnmpTarget(device="sw", port=agent.port, timeout_s=3.0,
                        credentials=SnmpCredentials.model_validate(
                            {"version": version, "community": community}),
                        **settings)
    sink, registry = ListSink(), CollectorRegistry()
    return SnmpPoller(SnmpPollerConfig(targets=(target,)), sink, registry), sink, registry


def samples_of(frame: Frame) -> dict[tuple[str, str], float]:
    names = [CATALOGUE.by_id(m).name for m in frame.metric.tolist()]
    entities = [frame.entities[i] for i in frame.entity_idx.tolist()]
    return dict(zip(zip(entities, names, strict=True), frame.values().tolist(), strict=True))


def total(registry: CollectorRegistry, name: str) -> float:
    return sum(s.value for m in registry.collect() for s in m.samples if s.name == name)


@pytest.mark.parametrize("quirk", sorted(EXPECTED_IDS))
def test_every_port_of_a_quirky_agent_gets_an_id_and_its_counters_their_rate(
        quirk: str, tmp_path: Path) -> None:
    """Over UDP from snmpsim: poll 1 describes, poll 2 asks for values only; each
    counter moved DELTA between the polls (the 32-bit ones across 2**32)."""
    first, second = quirk_dirs(tmp_path, quirk)
    version = "v1" if quirk == "quirk_v1" else "v2c"
    with snmpsim_agent(first, max_varbinds=32 if quirk == "quirk_capped" else None) as agent:
        poller, sink, registry = poller_for(agent, quirk, version)
        poller.start(schedule=False)
        try:
            one = poller.collect_once()["sw"]
            agent.serve(second)
            two = poller.collect_once()["sw"]
        finally:
            poller.stop()
    assert one.up, one.last_error
    assert two.up, two.last_error
    before, after = (samples_of(f) for f in sink.frames)
    ids = {f"sw:{name}" for name in EXPECTED_IDS[quirk].values()}
    assert {e for e, _ in after} == ids
    assert all(e.isprintable() for e in ids)
    counters = {k for k in after if CATALOGUE.by_name(k[1]).kind is MetricKind.COUNTER}
    assert {m for _, m in counters} >= {"in_octets", "out_octets", "in_pkts", "out_pkts"}
    assert {k: after[k] - before[k] for k in counters} == dict.fromkeys(counters, DELTA)
    assert total(registry, "fabricops_snmp_errors_total") == 0
    assert one.last_walk is not None
    assert one.last_walk.described
    assert two.last_walk is not None
    assert not two.last_walk.described
    assert set(two.last_walk.columns) <= VALUE_COLUMNS
    assert two.last_walk.varbinds_received < one.last_walk.varbinds_received
    if quirk in ("quirk_counter32", "quirk_v1"):
        traffic = [k for k in counters if k[1] in ("in_octets", "out_octets", "in_pkts",
                                                      "out_pkts")]
        assert total(registry, "fabricops_snmp_wraps_total") == len(traffic)  # near 2**32
    assert total(registry, "fabricops_snmp_device_resets_total") == 0


def test_an_agent_restart_is_a_reset_never_a_spike_and_describes_again(tmp_path: Path) -> None:
    """sysUpTime goes back between polls (snmpsim restarted with the rebooted device's
    data): counters restart from the device's values, nothing wraps, the device is
    described again in the same poll, and poll 3 asks for values only."""
    records = read_snmprec(WALKS / "quirk_restart.snmprec")
    first, second = tmp_path / "poll1", tmp_path / "poll2"
    write_snmprec(first / "quirk_restart.snmprec", records)
    write_snmprec(second / "quirk_restart.snmprec",
                  later_poll(records, 500, uptime=1200, restarted=True))
    with snmpsim_agent(first) as agent:
        poller, sink, registry = poller_for(agent, "quirk_restart")
        poller.start(schedule=False)
        try:
            poller.collect_once()
            agent.serve(second)
            two = poller.collect_once()["sw"]
            three = poller.collect_once()["sw"]
        finally:
            poller.stop()
    before, after = samples_of(sink.frames[0]), samples_of(sink.frames[1])
    counters = [k for k in after if CATALOGUE.by_name(k[1]).kind is MetricKind.COUNTER]
    assert counters
    assert all(after[k] == 500 for k in counters)
    assert before[("sw:Ethernet1", "in_discards")] == 1  # not carried on to 1 + 499
    assert total(registry, "fabricops_snmp_wraps_total") == 0
    assert total(registry, "fabricops_snmp_device_resets_total") == len(counters)
    value = registry.get_sample_value
    assert value("fabricops_snmp_describes_total", {"reason": "restart"}) == 1
    assert two.last_walk is not None
    assert two.last_walk.described
    assert three.last_walk is not None
    assert not three.last_walk.described
    assert total(registry, "fabricops_snmp_errors_total") == 0


def test_new_interfaces_are_described_when_if_table_last_change_moves(tmp_path: Path) -> None:
    records = read_snmprec(WALKS / "quirk_no_ifname.snmprec")
    grown = [Record(r.oid, r.tag, 777) if r.oid == mib.instance(mib.IF_TABLE_LAST_CHANGE)
             else r for r in later_poll(records, 10)]
    grown += [Record(mib.instance(mib.IF_NAME, 9), 4, b"ge-0/0/9"),
              Record(mib.instance(mib.IF_HC_IN_OCTETS, 9), C64, 42)]
    first, second = tmp_path / "poll1", tmp_path / "poll2"
    write_snmprec(first / "quirk_no_ifname.snmprec", records)
    write_snmprec(second / "quirk_no_ifname.snmprec", grown)
    with snmpsim_agent(first) as agent:
        poller, sink, registry = poller_for(agent, "quirk_no_ifname")
        poller.start(schedule=False)
        try:
            poller.collect_once()
            agent.serve(second)
            poller.collect_once()
        finally:
            poller.stop()
    assert samples_of(sink.frames[1])[("sw:ge-0/0/9", "in_octets")] == 42
    value = registry.get_sample_value
    assert value("fabricops_snmp_describes_total", {"reason": "table_change"}) == 1
    assert total(registry, "fabricops_snmp_device_resets_total") == 0


def test_skipped_rows_are_counted_by_reason_and_never_describe_again() -> None:
    with snmpsim_agent(WALKS) as agent:
        poller, _, registry = poller_for(agent, "quirk_no_ifname")
        poller.start(schedule=False)
        try:
            for _ in range(3):
                assert poller.collect_once()["sw"].up
        finally:
            poller.stop()
    value = registry.get_sample_value
    assert value("fabricops_snmp_rows_skipped_total",
                 {"reason": "index_not_ifindex_priority"}) == 2 * 3
    assert value("fabricops_snmp_rows_skipped_total",
                 {"reason": "superseded_by_hc_counter"}) == 4 * 4  # poll 1 only
    assert total(registry, "fabricops_snmp_describes_total") == 1
    assert total(registry, "fabricops_snmp_errors_total") == 0


def test_a_naming_template_overrides_the_rule() -> None:
    with snmpsim_agent(WALKS) as agent:
        poller, sink, _ = poller_for(agent, "quirk_no_ifname",
                                     port_name="{ifAlias}")
        poller.start(schedule=False)
        try:
            poller.collect_once()
        finally:
            poller.stop()
    assert set(sink.frames[0].entities) == {"sw:ge-0/0/0", "sw:to spine-1", "sw:uplink-3",
                                            "sw:ifIndex-4"}  # no alias: the rule applies


@pytest.fixture
def garbling_proxy() -> Iterator[tuple[SimAgent, int, list[int]]]:
    """A UDP relay to snmpsim that answers the 1st and 4th request with junk bytes."""
    with snmpsim_agent(WALKS) as agent:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(0.2)
        upstream = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        upstream.settimeout(3)
        seen, stop = [0], threading.Event()

        def relay() -> None:
            while not stop.is_set():
                try:
                    data, client = sock.recvfrom(65535)
                except OSError:
                    continue
                seen[0] += 1
                if seen[0] in (1, 4):
                    sock.sendto(b"\x30\x05\x02\x01\x01\x04" + data[:7], client)
                    continue
                upstream.sendto(data, (agent.host, agent.port))
                sock.sendto(upstream.recvfrom(65535)[0], client)

        thread = threading.Thread(target=relay, daemon=True)
        thread.start()
        yield agent, int(sock.getsockname()[1]), seen
        stop.set()
        thread.join()
        sock.close()
        upstream.close()


def test_an_undecodable_answer_is_one_counted_error_and_the_poller_goes_on(
        garbling_proxy: tuple[SimAgent, int, list[int]]) -> None:
    _, port, seen = garbling_proxy
    target = SnmpTarget(device="sw", port=port, timeout_s=0.5, retries=2,
                        credentials=SnmpCredentials(community="quirk_counter32"))
    sink, registry = ListSink(), CollectorRegistry()
    poller = SnmpPoller(SnmpPollerConfig(targets=(target,)), sink, registry)
    poller.start(schedule=False)
    try:
        statuses = [poller.collect_once()["sw"] for _ in range(3)]
    finally:
        poller.stop()
    assert all(s.up for s in statuses)
    assert len(sink.frames) == 3
    assert seen[0] >= 4
    value = registry.get_sample_value
    assert value("fabricops_snmp_errors_total", {"reason": "malformed_datagram"}) == 2
    assert total(registry, "fabricops_snmp_errors_total") == 2


# --- the same walks replayed into the decoder -------------------------------------------

ALL_COLUMNS = (*dec.STATIC_COLUMNS, *dec.DYNAMIC_COLUMNS, *dec.DESCRIBE_SCALARS)


def replay(records: list[Record]) -> tuple[dec.DeviceDescription, dec.Samples]:
    tables = tables_of(records, ALL_COLUMNS)
    desc = dec.describe(tables)
    return desc, dec.decode_samples("sw", tables, desc)


@pytest.mark.parametrize("quirk", sorted(EXPECTED_IDS))
def test_quirk_walks_decode_to_unique_printable_ids(quirk: str) -> None:
    records = read_snmprec(WALKS / f"{quirk}.snmprec")
    if quirk == "quirk_v1":
        records = [r for r in records if r.tag != C64]  # what SNMPv1 can carry
    desc, out = replay(records)
    assert desc.names == EXPECTED_IDS[quirk]
    assert len(set(desc.names.values())) == len(desc.names)
    assert (out.malformed, out.problem) == (0, None)
    assert set(out.entities) == {f"sw:{n}" for n in EXPECTED_IDS[quirk].values()}
    assert records == read_snmprec(WALKS / f"{quirk}.snmprec") or quirk == "quirk_v1"


def test_quirk_files_are_what_the_generator_makes() -> None:
    for name, records in quirk_walks().items():
        assert read_snmprec(WALKS / f"{name}.snmprec") == sorted(records, key=lambda r: r.oid)


def test_speed_comes_from_if_high_speed_else_if_speed() -> None:
    desc, _ = replay(read_snmprec(WALKS / "quirk_no_ifname.snmprec"))
    assert desc.speeds_bps[1] == 100 * 10**9  # ifSpeed saturates at 2**32 - 1
    desc, _ = replay(read_snmprec(WALKS / "quirk_counter32.snmprec"))
    assert desc.speeds_bps == dict.fromkeys(range(1, 5), 10 ** 9)


def test_out_of_range_and_garbage_rows_are_malformed_the_rest_is_kept() -> None:
    records = read_snmprec(WALKS / "quirk_counter32.snmprec")
    bad: dict[mib.Oid, int | bytes] = {
        mib.instance(mib.IF_IN_OCTETS, 1): 2**32 + 5,  # past its 32 bits
        mib.instance(mib.IF_OPER_STATUS, 2): 9,  # no such state
        mib.instance(mib.IF_OUT_OCTETS, 3): b"\xff\x00"}  # not a number
    _, out = replay([Record(r.oid, r.tag, bad.get(r.oid, r.value)) for r in records])
    assert out.malformed == 3
    got = set(zip(out.entities, out.metrics, strict=True))
    assert ("sw:Ethernet1", "in_octets") not in got
    assert ("sw:Ethernet1", "out_octets") in got
    assert ("sw:Ethernet3", "in_octets") in got


def test_discontinuity_clocks() -> None:
    def clocks(uptime: int, change: int, ports: dict[int, int]) -> Clocks:
        return Clocks(uptime, change, ports)
    base = clocks(1000, 5, {1: 0, 2: 0})
    assert Discontinuity.between(None, base) == Discontinuity()
    assert Discontinuity.between(base, clocks(2000, 5, {1: 0, 2: 0})) == Discontinuity()
    moved = Discontinuity.between(base, clocks(2000, 5, {1: 0, 2: 1500}))
    assert moved.ports == {2}
    assert not moved.redescribe
    assert Discontinuity.between(base, clocks(10, 5, {})).restarted
    assert Discontinuity.between(base, clocks(2000, 6, {})).redescribe


def test_a_port_discontinuity_resets_only_that_port() -> None:
    tracker = dec.CounterTracker()
    first = dec.Samples(entities=["sw:a", "sw:b"], metrics=["in_octets"] * 2,
                        values=[2**32 - 10, 2**32 - 10], widths=[32, 32])
    tracker.update(first)
    second = dec.Samples(entities=["sw:a", "sw:b"], metrics=["in_octets"] * 2,
                         values=[5, 5], widths=[32, 32])
    update = tracker.update(second, reset_entities=frozenset({"sw:b"}))
    assert update.values == [2**32 + 5, 5]
    assert (update.wraps, update.resets) == (1, 1)


def test_a_vendor_template_applies_by_sys_object_id_and_a_device_one_wins() -> None:
    tables = tables_of(read_snmprec(WALKS / "quirk_no_ifname.snmprec"), ALL_COLUMNS)
    juniper = {"1.3.6.1.4.1.2636": "{ifAlias}", "1.3.6.1.4.1.30065": "{ifDescr}"}
    assert dec.describe(tables, vendor_templates=juniper).names[2] == "to spine-1"
    assert dec.describe(tables, "{ifDescr}.{ifIndex}", juniper).names[2] == "ge-0/0/1.2"
    assert dec.describe(tables, vendor_templates={"1.3.6.1.4.1.9": "{ifAlias}"}
                        ).names[2] == "ge-0/0/1"
