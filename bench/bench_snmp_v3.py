"""SNMPv3 authPriv (HMAC-SHA-96 + AES-128) against SNMPv2c: the poller's CPU per poll.

One simulated agent in its own process serves N switches of P ports (a board that
does not advance). The poller's transport clients walk the steady columns of every
switch (counters, states, PFC and sensor values: what the poller reads on all but
its describe polls) with its GETBULK sizing, all switches at once, first with
SNMPv2c communities, then with SNMPv3 authPriv (one user, a context per switch)
through pysnmp's engine and through the poller's native USM client, one warm-up
round (it includes SNMPv3 engine discovery and key localization) and then
``--rounds`` measured rounds each. Printed: wall seconds and this process's CPU
seconds (time.process_time; the agent's CPU is not counted) per round, varbinds
per round, and CPU relative to SNMPv2c.

    python bench/bench_snmp_v3.py [--switches 20] [--ports 64] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import socket
import sys
import time
from pathlib import Path

from fabricops.collectors.snmp_config import SnmpTarget
from fabricops.collectors.snmp_transport import V2cClient, V3Client
from fabricops.collectors.snmp_usm_client import UsmClient
from fabricops.core import snmp_mib as mib
from fabricops.core.inventory import SnmpCredentials
from fabricops.core.snmp_mib import Oid

sys.path.insert(0, str(Path(__file__).parent))
from bench_snmp import serve

STEADY_COLUMNS = (mib.IF_OPER_STATUS, mib.IF_IN_DISCARDS, mib.IF_IN_ERRORS, mib.IF_OUT_DISCARDS,
                  mib.DOT3_FCS_ERRORS, mib.IF_HC_IN_OCTETS, mib.IF_HC_IN_UCAST,
                  mib.IF_HC_OUT_OCTETS, mib.IF_HC_OUT_UCAST, mib.PRIO_REQUESTS,
                  mib.PRIO_INDICATIONS, mib.SENSOR_VALUE)
V3 = SnmpCredentials(version="v3", user="fabricops", auth_key="fabricops-auth",
                     priv_key="fabricops-priv")


Client = V2cClient | V3Client | UsmClient


async def _walk(client: Client, t: SnmpTarget, columns: list[Oid]) -> int:
    """Walk ``columns`` side by side with GETBULK as the poller does; varbinds read."""
    cursor, n = {c: c for c in columns}, 0
    while cursor:
        cols = list(cursor)
        reps = max(1, min(32, 512 // len(cols)))
        rows = await client.bulk(t, [cursor[c] for c in cols], 0, reps, 2)
        n += len(rows)
        ended = set(cols) if not rows else set()
        for k, (oid, value) in enumerate(rows):
            col = cols[k % len(cols)]
            if col in ended:
                continue
            if value is None or oid[:len(col)] != col or oid <= cursor[col]:
                ended.add(col)
            else:
                cursor[col] = oid
        for col in ended:
            del cursor[col]
    return n


async def _rounds(port: int, devices: list[str], rounds: int, v3: str
                  ) -> tuple[float, float, float]:
    targets = [SnmpTarget(device=d, port=port, timeout_s=5,
                          credentials=V3.model_copy(update={"context": d}) if v3 else
                          SnmpCredentials(community=d)) for d in devices]
    loop = asyncio.get_running_loop()
    client: Client
    if v3 == "pysnmp":
        client = V3Client()
        for t in targets:
            await client.connect(t)
    elif v3 == "native":
        client = await UsmClient.open()
    else:
        _, client = await loop.create_datagram_endpoint(lambda: V2cClient(lambda: None),
                                                        family=socket.AF_INET)
    columns = [c.oid for c in STEADY_COLUMNS]
    try:
        await asyncio.gather(*(_walk(client, t, columns) for t in targets))  # warm up
        t0, cpu0, n = time.perf_counter(), time.process_time(), 0
        for _ in range(rounds):
            n += sum(await asyncio.gather(*(_walk(client, t, columns) for t in targets)))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        if isinstance(client, V3Client | UsmClient):
            client.close()
        elif client.transport is not None:
            client.transport.close()
    return seconds / rounds, cpu / rounds, n / rounds


def steady_rounds(port: int, devices: list[str], rounds: int, v3: str = ""
                  ) -> tuple[float, float, float]:
    """(wall s, CPU s, varbinds) per round of walks of every device, after a warm-up."""
    return asyncio.run(_rounds(port, devices, rounds, v3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--switches", type=int, default=20)
    parser.add_argument("--ports", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    port_q: mp.Queue[int] = ctx.Queue()
    done = ctx.Event()
    agent = ctx.Process(target=serve, args=(args.switches, args.ports, port_q, done),
                        daemon=True)
    agent.start()
    try:
        port = port_q.get(timeout=120)
        run(port, [f"sw-{s:03d}" for s in range(args.switches)], args.ports, args.rounds)
    finally:
        done.set()
        agent.join(timeout=10)


def run(port: int, devices: list[str], ports: int, rounds: int) -> None:
    v2c = steady_rounds(port, devices, rounds)
    rows = [("SNMPv2c (native)", v2c),
            ("SNMPv3 authPriv, pysnmp", steady_rounds(port, devices, rounds, "pysnmp")),
            ("SNMPv3 authPriv, native", steady_rounds(port, devices, rounds, "native"))]
    print(f"{len(devices)} switches x {ports} ports, {rounds} rounds each; CPU is this "
          "process's own (time.process_time), SHA/AES-128 for SNMPv3")
    print(f"{'client':26} {'wall s/round':>12} {'CPU s/round':>12} {'varbinds/round':>15} "
          f"{'CPU / v2c':>10}")
    for name, (wall, cpu, vb) in rows:
        print(f"{name:26} {wall:12.3f} {cpu:12.3f} {vb:15.0f} {cpu / max(v2c[1], 1e-9):10.2f}")


if __name__ == "__main__":
    main()
