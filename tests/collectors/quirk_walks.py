"""The quirk walks of ``tests/collectors/walks/``: how each was made, and their later polls.

Each ``quirk_*.snmprec`` is one agent that real devices resemble in one way (no
ifName, 32-bit counters only, two ports named ``lo0``, NUL-terminated names,
SNMPv1 only, ...). ``python -m tests.collectors.quirk_walks`` writes them again;
``later_poll`` derives what the same agent serves at a later poll (counters moved
on, modulo their width, or the agent restarted).
"""

from __future__ import annotations

from collections.abc import Iterable

from fabricops.core import snmp_mib as mib
from tests.collectors.snmprec import WALKS, Record, write_snmprec

INT, OCT, OID, C32, G32, TT, C64 = 2, 4, 6, 65, 66, 67, 70
GIGA = 1_000_000_000
ARISTA, JUNIPER = (1, 3, 6, 1, 4, 1, 30065, 1, 1), (1, 3, 6, 1, 4, 1, 2636, 1, 1, 1, 2, 29)
IF_TYPE = (1, 3, 6, 1, 2, 1, 2, 2, 1, 3)
IF_ADMIN = (1, 3, 6, 1, 2, 1, 2, 2, 1, 7)


def system(name: str, sys_object_id: tuple[int, ...], uptime: int,
           table_last_change: int | None = 0) -> list[Record]:
    """The system group, and ifTableLastChange unless None."""
    out = [Record(mib.instance(mib.SYS_DESCR), OCT, f"{name} recorded agent".encode()),
           Record(mib.instance(mib.SYS_OBJECT_ID), OID, mib.ber_oid(sys_object_id)[2:]),
           Record(mib.instance(mib.SYS_UPTIME), TT, uptime),
           Record(mib.instance(mib.SYS_NAME), OCT, name.encode())]
    if table_last_change is not None:
        out.append(Record(mib.instance(mib.IF_TABLE_LAST_CHANGE), TT, table_last_change))
    return out


def port(ifx: int, *, name: bytes | None = None, descr: bytes | None = None,
         alias: bytes | None = None, hc: bool = True, c32: bool = True,
         speed_mbps: int = 100_000, base: int = 0) -> list[Record]:
    """One interface: IF-MIB rows (names only where given, HC and/or 32-bit counters)."""
    at = base + ifx * 1_000_003
    out = [Record(mib.instance(mib.IF_INDEX, ifx), INT, ifx),
           Record((*IF_TYPE, ifx), INT, 6),
           Record(mib.instance(mib.IF_SPEED, ifx), G32, min(speed_mbps * 10**6, 2**32 - 1)),
           Record((*IF_ADMIN, ifx), INT, 1),
           Record(mib.instance(mib.IF_OPER_STATUS, ifx), INT, 1),
           Record(mib.instance(mib.IF_IN_DISCARDS, ifx), C32, ifx),
           Record(mib.instance(mib.IF_IN_ERRORS, ifx), C32, 2 * ifx),
           Record(mib.instance(mib.IF_OUT_DISCARDS, ifx), C32, 3 * ifx)]
    if descr is not None:
        out.append(Record(mib.instance(mib.IF_DESCR, ifx), OCT, descr))
    if c32:
        out += [Record(mib.instance(c, ifx), C32, (at + k) % 2**32)
                for k, c in enumerate((mib.IF_IN_OCTETS, mib.IF_IN_UCAST, mib.IF_OUT_OCTETS,
                                       mib.IF_OUT_UCAST))]
    if name is not None:
        out.append(Record(mib.instance(mib.IF_NAME, ifx), OCT, name))
    if hc:
        out += [Record(mib.instance(c, ifx), C64, at + k)
                for k, c in enumerate((mib.IF_HC_IN_OCTETS, mib.IF_HC_IN_UCAST,
                                       mib.IF_HC_OUT_OCTETS, mib.IF_HC_OUT_UCAST))]
        out.append(Record(mib.instance(mib.IF_HIGH_SPEED, ifx), G32, speed_mbps))
    if alias is not None:
        out.append(Record(mib.instance(mib.IF_ALIAS, ifx), OCT, alias))
    return out


def with_if_number(records: list[Record]) -> list[Record]:
    n = sum(1 for r in records if r.oid[:len(mib.IF_INDEX.oid)] == mib.IF_INDEX.oid)
    return [*records, Record(mib.instance(mib.IF_NUMBER), INT, n)]


def quirk_walks() -> dict[str, list[Record]]:
    """Every quirk agent, by community name."""
    walks: dict[str, list[Record]] = {}
    walks["quirk_no_ifname"] = [  # ifDescr, then ifAlias, then nothing; odd rows besides
        *system("no-ifname", JUNIPER, 5_000_000),
        *port(1, descr=b"ge-0/0/0"), *port(2, descr=b"ge-0/0/1", alias=b"to spine-1"),
        *port(3, alias=b"uplink-3"), *port(4),
        Record(mib.instance(mib.PRIO_REQUESTS, 1), C64, 7),  # no priority in the index
        Record(mib.instance(mib.PRIO_REQUESTS, 1, 12), C64, 7)]  # priority 12: no such one
    walks["quirk_counter32"] = [
        *system("counter32", ARISTA, 9_000_000, None),
        *(r for i in range(1, 5) for r in port(i, name=f"Ethernet{i}".encode(), hc=False,
                                               speed_mbps=1000, base=2**32 - 200_000_000))]
    walks["quirk_duplicate_names"] = [
        *system("duplicates", JUNIPER, 7_000_000),
        *port(1, name=b"lo0"), *port(2, name=b"et-0/0/0"), *port(3, name=b"et-0/0/1"),
        *port(5, name=b"lo0"), *port(6, name=b"lo0#5")]  # a literal name in the way
    walks["quirk_nul_name"] = [
        *system("nul-names", ARISTA, 6_000_000),
        *port(1, name=b"Ethernet1\x00"), *port(2, name=b"Ethernet2\x00\x00\x00"),
        *port(3, name=b"Eth\x07ernet3\r\n"), *port(4, name=b"\x00\x00", descr=b"Ethernet4")]
    walks["quirk_capped"] = [
        *system("capped", ARISTA, 4_000_000),
        *(r for i in range(1, 49) for r in port(i, name=f"Ethernet{i}/1".encode()))]
    walks["quirk_v1"] = [  # an SNMPv1 agent: the Counter64 columns cannot be carried
        *system("v1-only", JUNIPER, 3_000_000),
        *(r for i in range(1, 7) for r in port(i, descr=f"port {i}".encode(), speed_mbps=1000,
                                               base=2**32 - 50_000_000))]
    walks["quirk_restart"] = [
        *system("restart", ARISTA, 8_640_000),
        *(r for i in range(1, 5) for r in port(i, name=f"Ethernet{i}".encode(),
                                               base=3_900_000_000))]
    return {k: with_if_number(v) for k, v in walks.items()}


def switch_400() -> list[Record]:
    """A 400-port switch with HC counters and per-priority PFC counters."""
    out = system("switch-400", ARISTA, 12_000_000)
    for i in range(1, 401):
        out += port(i, name=f"Ethernet{(i - 1) // 8 + 1}/{(i - 1) % 8 + 1}".encode())
        out += [Record(mib.instance(c, i, p), C64, 1000 * i + p)
                for c in (mib.PRIO_REQUESTS, mib.PRIO_INDICATIONS) for p in range(8)]
    return with_if_number(out)


def later_poll(records: Iterable[Record], delta: int, uptime: int | None = None,
               restarted: bool = False) -> list[Record]:
    """The same agent a poll later: every counter ``delta`` on (modulo its width) and
    sysUpTime moved; ``restarted``: counters back to ``delta`` and sysUpTime ``uptime``."""
    out = []
    for r in records:
        value = r.value
        if r.tag in (C32, C64) and isinstance(value, int):
            value = delta if restarted else (value + delta) % 2 ** (32 if r.tag == C32 else 64)
        elif r.oid == mib.instance(mib.SYS_UPTIME) and isinstance(value, int):
            value = uptime if uptime is not None else value + 1000
        out.append(Record(r.oid, r.tag, value, r.variation))
    return out


def main() -> None:
    for name, records in quirk_walks().items():
        write_snmprec(WALKS / f"{name}.snmprec", records)
    write_snmprec(WALKS / "switch_400port.snmprec", switch_400())


if __name__ == "__main__":
    main()
