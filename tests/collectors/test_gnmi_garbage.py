"""Garbage, truncated and out-of-range gNMI input over real gRPC: counted, and the
stream (or, after a message gRPC cannot parse, the next subscription) goes on."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.collectors.gnmi_config import GnmiEndpoint
from fabricops.collectors.gnmi_mapping import NotificationMapper
from tests.collectors.gnmi_replay import REPLAY_TS_NS, ReplayTarget, notification
from tests.collectors.test_gnmi_dialects import DEV, collecting, counter, samples_of, wait

IF = "/interfaces/interface[name=Ethernet1]/state"


def response(note: dict[str, Any]) -> bytes:
    return gnmi_pb2.SubscribeResponse(update=notification(note)).SerializeToString()


def good(octets: int) -> dict[str, Any]:
    """A sample of its own instant (``octets`` seconds after the garbage's)."""
    return {"prefix": {"path": IF}, "timestamp": REPLAY_TS_NS + octets * 10**9,
            "update": [{"path": "counters/in-octets", "uint": octets}]}


DEEP: Any = 1
for _ in range(40):
    DEEP = {"x": DEEP}

GARBAGE = [  # (name, notification, error kind counted, how many)
    ("bad JSON", {"prefix": {"path": IF}, "update": [
        {"path": "counters", "json_ietf_raw": '{"in-octets": "12'}]}, "bad_encoding", 1),
    ("truncated JSON", {"prefix": {"path": IF}, "update": [
        {"path": "counters", "json_ietf_raw": '{"in-octets": "12", "out-oct'}]},
     "bad_encoding", 1),
    ("wrong types", {"prefix": {"path": IF}, "update": [
        {"path": "counters/in-octets", "string": "lots"},
        {"path": "counters/out-octets", "bool": True},
        {"path": "counters", "json_ietf": {"in-errors": None, "in-discards": [1, 2]}},
        {"path": "oper-status", "string": "SIDEWAYS"}]}, "bad_value", 5),
    ("huge numbers", {"prefix": {"path": IF}, "update": [
        {"path": "counters", "json_ietf": {"in-octets": "18446744073709551616",
                                           "out-octets": "1" + "0" * 5000}},
        {"path": "counters/in-errors", "int": -1},
        {"path": "counters/in-discards", "double": 1e300}]}, "bad_value", 4),
    ("out of range", {"prefix": {"path": "/components/component[name=Ethernet1]"}, "update": [
        {"path": "state/temperature/instant", "double": 900.0},
        {"path": "transceiver/physical-channels/channel[index=0]/state/input-power/instant",
         "decimal": [1, 40]}]}, "bad_value", 2),
    ("unknown encodings", {"prefix": {"path": IF}, "update": [
        {"path": "counters/in-octets", "bytes": b"\x01"},
        {"path": "counters/out-octets", "proto_bytes": b"\x08\x01"},
        {"path": "counters/in-errors", "any": {}},
        {"path": "counters/in-discards", "leaflist": {}}]}, "bad_encoding", 4),
    ("too deep", {"prefix": {"path": IF}, "update": [
        {"path": "counters", "json": DEEP}]}, "bad_encoding", 1),
]


@pytest.mark.parametrize(("name", "note", "kind", "count"), GARBAGE,
                         ids=[g[0] for g in GARBAGE])
def test_garbage_in_a_notification_is_counted_by_kind(name: str, note: dict[str, Any],
                                                      kind: str, count: int) -> None:
    mapped = NotificationMapper(DEV).map(notification(note), seq=0, received_ns=1)
    assert mapped.errors == {kind: count}
    assert mapped.leaves == count
    assert mapped.problem is not None


def test_garbage_is_counted_and_the_stream_goes_on() -> None:
    stream = [response(good(1))] + [response(g[1]) for g in GARBAGE] + [
        response(good(2)),
        gnmi_pb2.SubscribeResponse(update=gnmi_pb2.Notification(
            timestamp=-5, update=[])).SerializeToString(),
        gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString(),
        response(good(3))[:7],  # truncated: gRPC cannot parse it and ends the call
    ]
    target = ReplayTarget(stream).start()
    try:
        with collecting(GnmiEndpoint(device=DEV, address=target.address)) as (collector, sink):
            wait(lambda: target.subscribes >= 2 and len(sink.frames) >= 4)
    finally:
        target.stop()
    assert samples_of(sink.frames[:2]) == {("Ethernet1", "in_octets"): 2}
    assert [samples_of([f]) for f in sink.frames[:2]] == [
        {("Ethernet1", "in_octets"): 1}, {("Ethernet1", "in_octets"): 2}]
    for kind in ("bad_value", "bad_encoding"):
        expected = sum(g[3] for g in GARBAGE if g[2] == kind)
        assert counter(collector, "fabricops_gnmi_errors_total", reason=kind) >= expected
    assert counter(collector, "fabricops_gnmi_errors_total", reason="bad_message") >= 1
    assert counter(collector, "fabricops_gnmi_errors_total", reason="bad_timestamp") >= 1
    assert collector.status()[DEV].reconnects >= 1


def test_unparseable_values_name_the_path_and_the_cause() -> None:
    note = {"prefix": {"path": IF}, "update": [
        {"path": "counters", "json_ietf_raw": json.dumps({"in-octets": 1})[:-3]}]}
    mapped = NotificationMapper(DEV).map(notification(note), seq=0, received_ns=1)
    assert mapped.problem is not None
    assert mapped.problem.startswith(f"{IF}/counters: json_ietf_val is not JSON")
