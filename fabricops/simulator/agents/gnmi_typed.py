"""YANG types of the leaves the simulated target serves, and their gNMI TypedValues.

Each served leaf has the type its model gives it:

- counters and the queue lengths (``instant-queue-len``, ``max-queue-len``) are
  ``uint64`` (``oc-yang:counter64``);
- ``oper-status`` is an ``enumeration`` (``UP``, ``DOWN``, ...);
- optical powers (``input-power/instant``, ``output-power/instant``) are
  ``decimal64`` with 2 fraction digits, ``temperature/instant`` with 1
  (openconfig-types and openconfig-platform-types);
- gauges outside the OpenConfig models (``/nics/nic/state/tx-rate``) are
  IEEE-754 doubles.

How each type is carried follows the gNMI specification (0.8.0, the version of
the proto pygnmi ships, which the target announces):

================  ===================  ======================  =====================
type              PROTO                JSON (RFC 7159)         JSON_IETF (RFC 7951)
================  ===================  ======================  =====================
uint64            ``uint_val``         number ``123``          string ``"123"``
decimal64         ``double_val``       number ``-3.21``        string ``"-3.21"``
enumeration       ``string_val``       string ``"UP"``         string ``"UP"``
double            ``double_val``       number                  number
================  ===================  ======================  =====================

Section 2.2.3 of the specification (since 0.7.0) says decimal64 values "should
also be encoded as double_val when PROTO encoding is requested", and the 0.8.0
proto marks ``decimal_val`` deprecated; ``Decimal64Proto.DECIMAL_VAL`` sends the
deprecated ``decimal_val {digits, precision}`` instead, as targets written
against gNMI before 0.7.0 do. A decimal64 value is first rounded to its fraction
digits, so every encoding carries the same number. A value that is not finite
cannot be a decimal64 and goes out as ``double_val`` (PROTO) or the JSON string
``"NaN"``/``"Infinity"``.

Every leaf is sent on its own (JSON values are bare, section 2.3.1), so there are
no JSON member names to qualify with a module name; none of these leaves is an
identityref, whose value RFC 7951 would qualify.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from enum import StrEnum
from typing import Final, NamedTuple

from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.catalogue import Metric, MetricKind
from fabricops.core.openconfig import OPER_STATUS_NAMES

PROTO: Final = gnmi_pb2.PROTO
JSON: Final = gnmi_pb2.JSON
JSON_IETF: Final = gnmi_pb2.JSON_IETF
UINT64, DECIMAL64, ENUMERATION, DOUBLE = 0, 1, 2, 3
_U64_MAX: Final = 2**64 - 1
_DOUBLE: Final = struct.Struct("<d")
_SMALL: Final = tuple(bytes((i,)) for i in range(128))


class Decimal64Proto(StrEnum):
    """How a decimal64 leaf is carried with PROTO encoding."""

    DOUBLE_VAL = "double_val"
    DECIMAL_VAL = "decimal_val"


class LeafType(NamedTuple):
    """A leaf's YANG type: one of UINT64, DECIMAL64, ENUMERATION, DOUBLE, and the
    fraction digits of a decimal64."""

    code: int
    fraction_digits: int = 0


#: Gauges whose model gives them a type other than a double, by schema path.
GAUGE_TYPES: Final[dict[str, LeafType]] = {
    "/qos/interfaces/interface/output/queues/queue/state/instant-queue-len": LeafType(UINT64),
    "/qos/interfaces/interface/output/queues/queue/state/max-queue-len": LeafType(UINT64),
    "/components/component/transceiver/physical-channels/channel/state/input-power/instant":
        LeafType(DECIMAL64, 2),
    "/components/component/transceiver/physical-channels/channel/state/output-power/instant":
        LeafType(DECIMAL64, 2),
    "/components/component/state/temperature/instant": LeafType(DECIMAL64, 1),
}


def leaf_type(metric: Metric) -> LeafType:
    """The YANG type of ``metric``'s OpenConfig leaf."""
    if metric.kind is MetricKind.COUNTER:
        return LeafType(UINT64)
    if metric.kind is MetricKind.STATE:
        return LeafType(ENUMERATION)
    return GAUGE_TYPES.get(metric.family.sources.openconfig_path or "", LeafType(DOUBLE))


def varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer."""
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited protobuf field: its tag byte(s), length and payload."""
    return tag + varint(len(payload)) + payload


ValueEncoder = Callable[[int, int, int | float], bytes]
"""(type code, fraction digits, value) -> the serialized ``gnmi.TypedValue``."""


def value_encoder(encoding: int, decimal64: Decimal64Proto = Decimal64Proto.DOUBLE_VAL,
                  ) -> ValueEncoder:
    """The TypedValue encoder of ``encoding`` (PROTO, JSON or JSON_IETF)."""
    if encoding == PROTO:
        return _proto_decimal if decimal64 is Decimal64Proto.DECIMAL_VAL else _proto
    return _json_ietf if encoding == JSON_IETF else _json


_STATE_PROTO: Final = {code: field(b"\x0a", name.encode())
                       for code, name in OPER_STATUS_NAMES.items()}


def _uint(value: int | float) -> int:
    if isinstance(value, int):
        return value
    return min(max(round(value), 0), _U64_MAX) if math.isfinite(value) else 0


def _decimal_text(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def _proto(code: int, digits: int, value: int | float) -> bytes:
    if code == UINT64:
        return b"\x18" + varint(_uint(value))
    if code == ENUMERATION:
        return _STATE_PROTO.get(int(value)) or field(b"\x0a", str(value).encode())
    if code == DECIMAL64 and math.isfinite(value):
        value = float(_decimal_text(value, digits))
    return b"\x71" + _DOUBLE.pack(value)


def _proto_decimal(code: int, digits: int, value: int | float) -> bytes:
    if code != DECIMAL64 or not math.isfinite(value):
        return _proto(code, digits, value)
    scaled = int(_decimal_text(value, digits).replace(".", ""))
    body = b"\x08" + varint(scaled & _U64_MAX) + b"\x10" + varint(digits)
    return field(b"\x3a", body)


def _json_text(code: int, digits: int, value: int | float, quote_64: bool) -> bytes:
    if code == ENUMERATION:
        name = OPER_STATUS_NAMES.get(int(value))
        return b'"%s"' % (name.encode() if name else str(value).encode())
    if code == UINT64:
        return (b'"%d"' if quote_64 else b"%d") % _uint(value)
    if not math.isfinite(value):
        return b'"%s"' % ("NaN" if math.isnan(value) else
                          "Infinity" if value > 0 else "-Infinity").encode()
    if code == DECIMAL64:
        text = _decimal_text(value, digits).encode()
        return b'"%s"' % text if quote_64 else text
    return repr(float(value)).encode()


def _json(code: int, digits: int, value: int | float) -> bytes:
    return field(b"\x52", _json_text(code, digits, value, quote_64=False))


def _json_ietf(code: int, digits: int, value: int | float) -> bytes:
    return field(b"\x5a", _json_text(code, digits, value, quote_64=True))
