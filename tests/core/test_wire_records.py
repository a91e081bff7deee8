"""Low-volume records as protobuf messages: exact round trips, the model's ranges checked
on decode, records kept as JSON still read, and a model that drifts from its schema caught."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

import pytest
from pydantic import ConfigDict, ValidationError

from fabricops.core.actions import Action, ActionKind, ActionMode, Step, StepOp
from fabricops.core.bus import Topic
from fabricops.core.records import Event, EventKind, SamplingPolicy, Severity
from fabricops.core.wire_records import WireModel, check
from fabricops.core.wire_schema import SchemaError, message_class


def action(**params: str | int | float | bool) -> Action:
    return Action(id="a-1", diagnosis_id="d-1", created_ns=1, ts_ns=2,
                  kind=ActionKind.SHUT_LINK, target="leaf-0:eth1", fault_type="flap",
                  confidence=0.5, mode=ActionMode.APPROVE,
                  steps=(Step(op=StepOp.SHUT_PORT, target="leaf-0:eth1", params=params),))


def test_params_keep_their_exact_types_and_the_bytes_do_not_depend_on_their_order() -> None:
    a = action(flag=True, count=3, share=0.25, job="j", zero=0, off=False)
    back = Action.decode(a.encode())
    assert back == a
    assert {k: type(v) for k, v in back.steps[0].params.items()} == {
        k: type(v) for k, v in a.steps[0].params.items()}
    assert action(b=1, a=2).encode() == action(a=2, b=1).encode()


def test_defaults_and_optional_fields_survive_the_wire() -> None:
    policy = SamplingPolicy(device="*", interval_s=5, ts_ns=0)
    assert SamplingPolicy.decode(policy.encode()).expires_ns is None
    expiring = policy.model_copy(update={"expires_ns": 0})
    assert SamplingPolicy.decode(expiring.encode()).expires_ns == 0
    event = Event(ts_ns=0, device="d", entity="d:e", metric="m", kind=EventKind.CLEARED,
                  value=0.0)
    assert Event.decode(event.encode()).severity is Severity.WARNING


def test_a_record_kept_as_json_is_still_read() -> None:
    policy = SamplingPolicy(device="leaf-0", interval_s=1, ts_ns=3)
    assert SamplingPolicy.decode(policy.model_dump_json().encode()) == policy


def test_unknown_fields_are_ignored() -> None:
    policy = SamplingPolicy(device="leaf-0", interval_s=1, ts_ns=3)
    assert SamplingPolicy.decode(policy.encode() + b"\xa0\x06\x01") == policy  # field 100


@pytest.mark.parametrize(("record", "field", "value", "cause"), [
    (SamplingPolicy(device="x", interval_s=1, ts_ns=0), "interval_s", -1.0, "greater than 0"),
    (SamplingPolicy(device="x", interval_s=1, ts_ns=0), "device", "", "at least 1 character"),
    (action(), "confidence", 7.5, "less than or equal to 1"),
    (action(), "state", 99, "unknown value 99"),
    (action(), "kind", 0, "kind\n  Field required"),
])
def test_decode_checks_what_the_model_states(record: WireModel, field: str, value: object,
                                             cause: str) -> None:
    message = message_class(record.SCHEMA).FromString(record.encode())
    setattr(message, field, value)
    with pytest.raises(ValidationError, match=cause):
        type(record).decode(message.SerializeToString())


@pytest.mark.parametrize("data", [b"\x00\xffgarbage", b"\x0a\x05ab", b"\x08\xff"])
def test_bytes_that_are_no_message_are_a_wire_invalid_validation_error(data: bytes) -> None:
    with pytest.raises(ValidationError) as caught:
        Action.decode(data)
    assert caught.value.errors()[0]["type"] == "wire_invalid"
    assert "not a fabricops.actions.v2.Action record" in str(caught.value)


class Colour(StrEnum):
    STATE_CHANGE = "state_change"
    THRESHOLD = "threshold"
    ANOMALY = "anomaly"
    CLEARED = "cleared"
    DRIFT = "drift"


def test_a_model_with_a_field_its_message_lacks_is_caught() -> None:
    class Wider(WireModel):
        model_config = ConfigDict(frozen=True)
        SCHEMA: ClassVar[str] = Topic.CONTROL.schema
        device: str
        interval_s: float
        ts_ns: int
        expires_ns: int | None = None
        reason: str = ""
        site: str = ""

    with pytest.raises(SchemaError, match=r"fields \['site'\] are not in the message"):
        check(Wider)


def test_a_model_with_an_enum_member_its_message_lacks_is_caught() -> None:
    class Drifting(WireModel):
        model_config = ConfigDict(frozen=True)
        SCHEMA: ClassVar[str] = Topic.EVENTS.schema
        ts_ns: int
        device: str
        entity: str
        metric: str
        kind: Colour
        value: float
        severity: Severity = Severity.WARNING
        detail: str = ""

    with pytest.raises(SchemaError, match=r"Colour\.DRIFT has no value EVENT_KIND_DRIFT"):
        check(Drifting)


def test_a_model_whose_field_type_differs_is_caught() -> None:
    class Retyped(WireModel):
        model_config = ConfigDict(frozen=True)
        SCHEMA: ClassVar[str] = Topic.CONTROL.schema
        device: str
        interval_s: str
        ts_ns: int
        expires_ns: int | None = None
        reason: str = ""

    with pytest.raises(SchemaError, match=r"interval_s .* do not agree on a plain scalar"):
        check(Retyped)
