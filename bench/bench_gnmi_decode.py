"""gNMI leaves decoded per CPU-second: JSON_IETF bundles against PROTO scalars, same leaves.

One switch of ``--ports`` ports sends every catalogue port leaf of the
OpenConfig profile (interface counters and oper-status, lossless queue, PFC
priority 3, transceiver lane 0, temperature: 18 leaves a port) as

- PROTO: one notification per port, one scalar update per leaf (decimal64 for
  optics, as OpenConfig types them);
- JSON_IETF: one notification per port, one update per container, the
  containers' leaves as RFC 7951 JSON (64-bit counters as strings).

Each form is serialized as SubscribeResponses once; a round parses them
(protobuf) and maps them to Frames, ``--repeat`` times (``NotificationMapper``, warm caches as in a
steady stream). The baseline, measured in the same run, is protobuf parsing
alone. CPU time is ``time.process_time``; the best of ``--rounds`` is shown.

    python bench/bench_gnmi_decode.py [--ports N] [--rounds N] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from fabricops.collectors.gnmi_mapping import NotificationMapper
from fabricops.core.openconfig import parse_path

TS = 1_767_225_600_000_000_000
COUNTERS = ("in-octets", "out-octets", "in-unicast-pkts", "out-unicast-pkts", "in-errors",
            "in-fcs-errors", "in-discards", "out-discards", "carrier-transitions")


def _path(text: str) -> Any:
    return gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=e.name, key=dict(e.keys))
                               for e in parse_path(text)])


def _containers(port: str, n: int) -> list[tuple[str, dict[str, Any]]]:
    """(container path, its leaves as JSON_IETF members) of one port."""
    qos = f"/qos/interfaces/interface[interface-id={port}]"
    return [
        (f"/interfaces/interface[name={port}]/state", {
            "openconfig-interfaces:counters": {c: str(n * 1000 + i)
                                               for i, c in enumerate(COUNTERS)},
            "openconfig-interfaces:oper-status": "UP"}),
        (f"{qos}/output/queues/queue[name=3]/state", {
            "instant-queue-len": str(n), "max-queue-len": str(2 * n),
            "ecn-marked-pkts": str(3 * n)}),
        (f"{qos}/pfc/priorities/priority[priority=3]/state", {
            "in-pause-frames": str(n), "out-pause-frames": str(n + 1)}),
        (f"/components/component[name={port}]/transceiver/physical-channels/channel[index=0]"
         "/state", {"input-power": {"instant": "-2.31"}, "output-power": {"instant": "1.05"}}),
        (f"/components/component[name={port}]/state", {"temperature": {"instant": "41.5"}}),
    ]


def _leaves(path: str, doc: dict[str, Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name, value in doc.items():
        sub = f"{path}/{name.rpartition(':')[2]}"
        out += _leaves(sub, value) if isinstance(value, dict) else [(sub, value)]
    return out


def _typed(value: str) -> Any:
    if value.lstrip("-").isdigit():
        return gnmi_pb2.TypedValue(uint_val=int(value))
    if value.replace(".", "", 1).lstrip("-").isdigit():
        digits = int(value.replace(".", ""))
        return gnmi_pb2.TypedValue(decimal_val=gnmi_pb2.Decimal64(
            digits=digits, precision=len(value.partition(".")[2])))
    return gnmi_pb2.TypedValue(string_val=value)


def streams(ports: int) -> tuple[list[bytes], list[bytes], int]:
    """(PROTO responses, JSON_IETF responses, leaves per round) of one switch."""
    proto, bundles, leaves = [], [], 0
    for p in range(ports):
        port = f"Ethernet{p + 1}"
        containers = _containers(port, p)
        scalars = [gnmi_pb2.Update(path=_path(leaf), val=_typed(v))
                   for path, doc in containers for leaf, v in _leaves(path, doc)]
        jsons = [gnmi_pb2.Update(path=_path(path), val=gnmi_pb2.TypedValue(
            json_ietf_val=json.dumps(doc).encode())) for path, doc in containers]
        leaves += len(scalars)
        for updates, out in ((scalars, proto), (jsons, bundles)):
            note = gnmi_pb2.Notification(timestamp=TS, prefix=gnmi_pb2.Path(target="sw"),
                                         update=updates)
            out.append(gnmi_pb2.SubscribeResponse(update=note).SerializeToString())
    return proto, bundles, leaves


def best_rate(work: Callable[[], int], rounds: int) -> float:
    """The best items per CPU-second of ``work`` (which returns how many it handled)."""
    best = 0.0
    for _ in range(rounds):
        start = time.process_time()
        n = work()
        best = max(best, n / max(time.process_time() - start, 1e-9))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ports", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=20, help="Samples of the switch a round")
    args = parser.parse_args()
    proto, bundles, leaves = streams(args.ports)
    proto, bundles, leaves = proto * args.repeat, bundles * args.repeat, leaves * args.repeat
    mapper = NotificationMapper("sw")

    def parse(stream: list[bytes]) -> Callable[[], int]:
        return lambda: sum(0 * len(gnmi_pb2.SubscribeResponse.FromString(b).update.update)
                           for b in stream) + leaves

    def decode(stream: list[bytes]) -> Callable[[], int]:
        def run() -> int:
            mapped = 0
            for seq, raw in enumerate(stream):
                note = gnmi_pb2.SubscribeResponse.FromString(raw).update
                mapped += mapper.map(note, seq, TS).mapped
            assert mapped == leaves, (mapped, leaves)
            return mapped
        return run

    rows = [("protobuf parse only, PROTO (baseline)", sum(map(len, proto)),
             best_rate(parse(proto), args.rounds)),
            ("parse + map, PROTO scalars", sum(map(len, proto)),
             best_rate(decode(proto), args.rounds)),
            ("parse + map, JSON_IETF bundles", sum(map(len, bundles)),
             best_rate(decode(bundles), args.rounds))]
    per_port = leaves // args.ports // args.repeat
    print(f"{args.ports} ports x {per_port} leaves x {args.repeat} samples = {leaves:,} leaves "
          f"a round, best of {args.rounds}")
    print(f"{'':40} {'bytes':>9} {'leaves/CPU-s':>14} {'vs PROTO':>9}")
    proto_rate = rows[1][2]
    for name, size, rate in rows:
        print(f"{name:40} {size:>9,} {rate:>14,.0f} {rate / proto_rate:>8.2f}x")


if __name__ == "__main__":
    main()
