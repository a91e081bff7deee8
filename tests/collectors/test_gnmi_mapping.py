"""The gNMI collector's pure notification mapping, its subscription request and policy book."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.collectors.gnmi_config import (
    DEFAULT_PATHS,
    GnmiCollectorConfig,
    GnmiEndpoint,
    PolicyBook,
    subscribe_request,
)
from fabricops.collectors.gnmi_mapping import NotificationMapper
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame, Source
from fabricops.core.openconfig import parse_path
from fabricops.core.records import SamplingPolicy

TS = 1_767_225_600_000_000_000


def _path(text: str) -> Any:
    return gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=e.name, key=dict(e.keys))
                               for e in parse_path(text)])


def _note(updates: list[tuple[str, Any]], prefix: str = "", ts: int = TS) -> Any:
    return gnmi_pb2.Notification(
        timestamp=ts, prefix=gnmi_pb2.Path(target="leaf-0", elem=_path(prefix).elem),
        update=[gnmi_pb2.Update(path=_path(p), val=gnmi_pb2.TypedValue(**v)) for p, v in updates])


def _samples(frame: Frame | None) -> dict[tuple[str, str], int | float]:
    assert frame is not None
    values = frame.values()
    return {(frame.entities[e], CATALOGUE.by_id(m).name): (float(v) if CATALOGUE.is_float[m]
                                                           else int(frame.raw[i]))
            for i, (e, m, v) in enumerate(zip(frame.entity_idx, frame.metric, values,
                                              strict=True))}


IF = "/interfaces/interface[name=eth12]/state"
PFC = "/qos/interfaces/interface[interface-id=eth12]/pfc/priorities/priority[priority=3]/state"
QUEUE = "/qos/interfaces/interface[interface-id=eth12]/output/queues/queue[name=3]/state"
OPTIC = "/components/component[name=eth12]/transceiver/physical-channels/channel[index=0]/state"

MAPPED = [  # (path, TypedValue fields, metric, value)
    (f"{IF}/counters/in-octets", {"uint_val": 2**63 + 5}, "in_octets", 2**63 + 5),
    (f"{IF}/counters/out-octets", {"json_ietf_val": b'"123456789012"'}, "out_octets",
     123456789012),
    (f"{IF}/counters/in-fcs-errors", {"int_val": 7}, "in_fcs_errors", 7),
    (f"{IF}/counters/in-errors", {"ascii_val": "77"}, "in_errors", 77),
    (f"{IF}/counters/in-discards", {"json_ietf_val": b'"18446744073709551615"'}, "in_discards",
     2**64 - 1),
    (f"{IF}/oper-status", {"string_val": "DOWN"}, "oper_status", 2),
    (f"{PFC}/in-pause-frames", {"uint_val": 42}, "pfc_rx_pause{prio=3}", 42),
    (f"{PFC}/out-pause-frames", {"json_val": b"43"}, "pfc_tx_pause{prio=3}", 43),
    (f"{QUEUE}/instant-queue-len", {"double_val": 1500.5}, "queue_depth_bytes", 1500.5),
    (f"{OPTIC}/input-power/instant", {"decimal_val": gnmi_pb2.Decimal64(digits=-231,
                                                                        precision=2)},
     "rx_power_dbm", -2.31),
    ("/components/component[name=eth12]/state/temperature/instant", {"float_val": 41.5},
     "temperature_c", 41.5),
    ("/openconfig-interfaces:interfaces/interface[name=eth12]/state/counters/in-discards",
     {"uint_val": 3}, "in_discards", 3),
]


@pytest.mark.parametrize(("path", "val", "metric", "expected"), MAPPED,
                         ids=[m[2] for m in MAPPED])
def test_a_leaf_maps_to_its_catalogue_metric(path: str, val: dict[str, Any], metric: str,
                                             expected: float) -> None:
    mapped = NotificationMapper("leaf-0").map(_note([(path, val)]), seq=9, received_ns=1)
    assert mapped.frame is not None
    assert (mapped.unmapped, mapped.bad_values) == (0, 0)
    assert (mapped.frame.device, mapped.frame.ts_ns, mapped.frame.seq) == ("leaf-0", TS, 9)
    assert mapped.frame.source is Source.GNMI
    assert _samples(mapped.frame) == {("leaf-0:eth12", metric): pytest.approx(expected)}


SKIPPED = [  # (path, TypedValue fields, counted as)
    ("/interfaces/interface[name=eth12]/state/mtu", {"uint_val": 9000}, "unsupported"),
    ("/system/state/hostname", {"string_val": "leaf-0"}, "unmapped"),
    ("/qos/interfaces/interface[interface-id=eth12]/output/queues/queue[name=7]/state/"
     "instant-queue-len", {"double_val": 1.0}, "unsupported"),
    ("/qos/interfaces/interface[interface-id=eth12]/pfc/priorities/priority[priority=9]/"
     "state/in-pause-frames", {"uint_val": 1}, "unmapped"),
    ("/interfaces/interface/state/counters/in-octets", {"uint_val": 1}, "unmapped"),
    (f"{IF}/counters/in-octets", {"string_val": "lots"}, "bad"),
    (f"{IF}/counters/in-octets", {"int_val": -1}, "bad"),
    (f"{IF}/counters/in-octets", {"bool_val": True}, "bad"),
    (f"{IF}/oper-status", {"string_val": "SIDEWAYS"}, "bad"),
    (f"{QUEUE}/instant-queue-len", {"json_ietf_val": b"{not json"}, "encoding"),
    (f"{QUEUE}/instant-queue-len", {"any_val": {}}, "encoding"),
]


@pytest.mark.parametrize(("path", "val", "counted"), SKIPPED)
def test_unknown_paths_and_bad_values_are_counted_and_skipped(
    path: str, val: dict[str, Any], counted: str,
) -> None:
    good = (f"{IF}/counters/in-octets", {"uint_val": 1})
    mapped = NotificationMapper("leaf-0").map(_note([(path, val), good]), seq=0, received_ns=1)
    expected = {"unmapped": (1, 0, 0, 0), "bad": (0, 1, 0, 0), "unsupported": (0, 0, 1, 0),
                "encoding": (0, 0, 0, 1)}[counted]
    assert (mapped.unmapped, mapped.bad_values, sum(mapped.unsupported.values()),
            mapped.bad_encodings) == expected
    assert (mapped.leaves, mapped.mapped) == (2, 1)
    if counted == "unsupported":
        assert mapped.problem is None
        assert len(mapped.unsupported) == 1
    else:
        named = {"unmapped": path.rpartition("/")[2], "bad": "leaf-0:eth12",
                 "encoding": "instant-queue-len"}[counted]
        assert mapped.problem is not None
        assert named in mapped.problem
    assert _samples(mapped.frame) == {("leaf-0:eth12", "in_octets"): 1}


def _mapped_fields(mapped: Any) -> tuple[Any, ...]:
    return (mapped.frame, mapped.leaves, mapped.mapped, mapped.unmapped, mapped.bad_values,
            mapped.problem)


@pytest.mark.parametrize("changed", [
    {},  # the same values again
    {f"{IF}/counters/in-octets": {"uint_val": 2**64 - 1}},
    {f"{QUEUE}/instant-queue-len": {"double_val": -0.0}},
    {f"{OPTIC}/input-power/instant": {"double_val": 1e9}},  # out of range: left out
    {"/components/component[name=eth12]/state/temperature/instant": {"double_val": 1e6},
     f"{IF}/oper-status": {"string_val": "UP"}},
])
def test_a_shape_seen_before_gives_the_frame_a_first_sight_gives(
        changed: dict[str, dict[str, Any]]) -> None:
    """A mapper remembers each shape of notification (its leaves in order) and
    builds later ones from the checked layout: the frames and counts are those a
    mapper meeting the notification first gives."""
    first = [(path, val) for path, val, _, _ in MAPPED]
    later = [(path, changed.get(path, val)) for path, val in first]
    seasoned = NotificationMapper("leaf-0")
    seasoned.map(_note(first), seq=0, received_ns=1)
    again = seasoned.map(_note(later, ts=TS + 10**9), seq=1, received_ns=1)
    fresh = NotificationMapper("leaf-0").map(_note(later, ts=TS + 10**9), seq=1, received_ns=1)
    assert _mapped_fields(again) == _mapped_fields(fresh)
    assert again.frame is not None
    assert again.frame.ts_ns == TS + 10**9
    assert not again.frame.raw.flags.writeable


def test_prefix_paths_and_missing_timestamps() -> None:
    note = _note([("counters/in-octets", {"uint_val": 10}), ("oper-status", {"string_val": "UP"})],
                 prefix=IF, ts=0)
    mapped = NotificationMapper("leaf-0").map(note, seq=1, received_ns=TS + 5)
    assert mapped.no_timestamp
    assert mapped.frame is not None
    assert mapped.frame.ts_ns == TS + 5
    assert _samples(mapped.frame) == {("leaf-0:eth12", "in_octets"): 10,
                                      ("leaf-0:eth12", "oper_status"): 1}
    assert NotificationMapper("leaf-0").map(_note([]), 0, 1).frame is None


def test_the_subscription_request_and_config_checks() -> None:
    endpoint = GnmiEndpoint(device="leaf-0", address="127.0.0.1:57400", target="sw0")
    request = subscribe_request(endpoint, interval_s=2.5).subscribe
    assert request.prefix.target == "sw0"
    assert request.encoding == gnmi_pb2.PROTO
    assert request.mode == gnmi_pb2.SubscriptionList.STREAM
    assert [s.sample_interval for s in request.subscription] == [2_500_000_000] * len(
        DEFAULT_PATHS)
    assert {s.mode for s in request.subscription} == {gnmi_pb2.SAMPLE}
    assert "/interfaces/interface/state" in DEFAULT_PATHS
    with pytest.raises(ValidationError, match="host:port"):
        GnmiEndpoint(device="leaf-0", address="leaf-0")
    with pytest.raises(ValidationError, match="not closed"):
        GnmiEndpoint(device="leaf-0", address="h:1", paths=("/interfaces/interface[name=x",))
    with pytest.raises(ValidationError, match="listed twice"):
        GnmiCollectorConfig(targets=(endpoint, endpoint))


def test_policy_book_precedence_age_and_expiry() -> None:
    book = PolicyBook()
    assert book.interval_s("leaf-0", 10.0, now_ns=0) == 10.0
    assert book.offer(SamplingPolicy(device="*", interval_s=5, ts_ns=100))
    assert not book.offer(SamplingPolicy(device="*", interval_s=7, ts_ns=99))
    assert book.offer(SamplingPolicy(device="leaf-0", interval_s=1, ts_ns=50, expires_ns=1000))
    assert book.interval_s("leaf-0", 10.0, now_ns=999) == 1
    assert book.interval_s("leaf-1", 10.0, now_ns=999) == 5
    assert book.interval_s("leaf-0", 10.0, now_ns=1000) == 5
    assert book.next_expiry_ns(now_ns=10) == 1000
    assert book.next_expiry_ns(now_ns=1000) is None
