"""The low-volume records (events, diagnoses, actions, ...) as Protocol Buffers messages.

A record is a pydantic model deriving from ``WireModel``; its ``SCHEMA`` names
its message. The message is derived from the model by field name, as
:mod:`fabricops.core.wire_schema` says: a scalar is the proto scalar, an
``X | None`` is a proto3 ``optional``, an enum maps value by value by name, a
nested model is a message, a tuple is a repeated field, a ``dict[str, Param]``
is a map to a message with one ``oneof`` (the member whose type is the
value's: bool, int, float or str). Enum value 0 (``..._UNSPECIFIED``) reads as
the field's default, or fails a required field.

``encode`` writes the message deterministically (map entries sorted), so one
record is always the same bytes. ``decode`` parses it and validates the
result with the model, so every range the model states is checked at the bus
boundary; anything wrong raises pydantic's ``ValidationError`` (type
``wire_invalid`` when the bytes are not the message at all). A value that
starts with ``{`` is read as the JSON these records were before their schema
(records kept in a store since then).

``check(model)`` compares a model with its message (every field, type and
enum value) and raises ``SchemaError`` naming the first difference; the
mapping is built and checked on first use of a model.
"""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Final, Self, Union, get_args, get_origin

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError
from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from fabricops.core.wire_schema import SchemaError, enum_numbers, message_class

_FD = FieldDescriptor
_SCALARS: Final[dict[type, frozenset[int]]] = {
    bool: frozenset({_FD.CPPTYPE_BOOL}),
    int: frozenset({_FD.CPPTYPE_INT32, _FD.CPPTYPE_INT64, _FD.CPPTYPE_UINT32,
                    _FD.CPPTYPE_UINT64}),
    float: frozenset({_FD.CPPTYPE_DOUBLE, _FD.CPPTYPE_FLOAT}),
    str: frozenset({_FD.CPPTYPE_STRING}),
    bytes: frozenset({_FD.CPPTYPE_STRING}),
}
_UNION_TYPES: Final = (Union, types.UnionType)


class WireModel(BaseModel):
    """A record whose wire encoding is the protobuf message ``SCHEMA``."""

    SCHEMA: ClassVar[str]

    def encode(self) -> bytes:
        """The ``SCHEMA`` message of this record, serialized deterministically."""
        msg = message_class(self.SCHEMA)()
        _fill(msg, self)
        data: bytes = msg.SerializeToString(deterministic=True)
        return data

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> Self:
        """The record of ``data``; ValidationError if it is not a valid one."""
        raw = bytes(data)
        if raw[:1] == b"{":
            return cls.model_validate_json(raw)
        msg = message_class(cls.SCHEMA)()
        try:
            msg.ParseFromString(raw)
        except DecodeError as exc:
            raise _invalid(cls, raw, str(exc) or "not a protobuf message") from None
        return cls.model_validate(_read(msg, cls))


@dataclass(frozen=True)
class _Field:
    name: str
    how: str  # scalar, optional, enum, message, repeated, repeated_enum, messages, params
    sub: Any = None  # the nested model, or the enum member -> number map
    back: Any = None  # number -> enum member


def check(model: type[WireModel]) -> None:
    """Raise SchemaError unless ``model`` and its message agree (see the module docstring)."""
    _plan(model, model.SCHEMA)


@functools.cache
def _plan(model: type[BaseModel], full_name: str) -> tuple[_Field, ...]:
    message: Descriptor = message_class(full_name).DESCRIPTOR
    fields = message.fields_by_name
    missing = sorted(set(model.model_fields) - set(fields))
    extra = sorted(set(fields) - set(model.model_fields))
    if missing or extra:
        raise SchemaError(f"{model.__name__} and message {full_name} differ: fields "
                          f"{missing} are not in the message, {extra} not in the record")
    return tuple(_field(model, name, info.annotation, fields[name])
                 for name, info in model.model_fields.items())


def _field(model: type[BaseModel], name: str, ann: Any, fd: FieldDescriptor) -> _Field:
    where = f"{model.__name__}.{name} / {fd.full_name}"
    origin, args = get_origin(ann), get_args(ann)
    if origin in _UNION_TYPES and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        _require(_is_scalar(inner, fd) and fd.has_presence and not fd.is_repeated,
                 where, "an optional scalar")
        return _Field(name, "optional")
    if origin is tuple:
        item = args[0]
        _require(fd.is_repeated, where, "a repeated field")
        if _is_model(item) and fd.message_type is not None:
            return _Field(name, "messages", _plan_of(item, fd))
        if _is_enum(item) and fd.enum_type is not None:
            numbers = enum_numbers(fd.enum_type, item)
            return _Field(name, "repeated_enum", numbers, _inverse(numbers))
        _require(_is_scalar(item, fd), where, "a repeated scalar")
        return _Field(name, "repeated")
    if origin is dict:
        entry = fd.message_type
        _require(entry is not None and entry.GetOptions().map_entry, where, "a map")
        value = entry.fields_by_name["value"].message_type
        _require(value is not None and len(value.oneofs) == 1, where,
                 "a map to a message with one oneof")
        return _Field(name, "params", value.oneofs[0].name)
    _require(not fd.is_repeated, where, "a singular field")
    if _is_enum(ann) and fd.enum_type is not None:
        numbers = enum_numbers(fd.enum_type, ann)
        return _Field(name, "enum", numbers, _inverse(numbers))
    if _is_model(ann) and fd.message_type is not None:
        return _Field(name, "message", _plan_of(ann, fd))
    _require(_is_scalar(ann, fd) and not fd.has_presence, where, "a plain scalar")
    return _Field(name, "scalar")


def _plan_of(model: type[BaseModel], fd: FieldDescriptor) -> tuple[type[BaseModel], str]:
    _plan(model, fd.message_type.full_name)
    return model, fd.message_type.full_name


def _require(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise SchemaError(f"{where}: the record and the message do not agree on {what}")


def _is_scalar(py: Any, fd: FieldDescriptor) -> bool:
    kinds = _SCALARS.get(py)
    if kinds is None or fd.cpp_type not in kinds or fd.message_type or fd.enum_type:
        return False
    return (py is bytes) == bool(fd.type == _FD.TYPE_BYTES)


def _is_model(py: Any) -> bool:
    return isinstance(py, type) and issubclass(py, BaseModel)


def _is_enum(py: Any) -> bool:
    return isinstance(py, type) and issubclass(py, Enum)


def _inverse(numbers: dict[Any, int]) -> dict[int, Any]:
    return {n: member.value for member, n in numbers.items()}


def _fill(msg: Any, record: BaseModel) -> None:
    """Set ``msg``'s fields from ``record``."""
    for f in _plan(type(record), msg.DESCRIPTOR.full_name):
        value = getattr(record, f.name)
        how = f.how
        if how == "scalar" or (how == "optional" and value is not None):
            setattr(msg, f.name, value)
        elif how == "enum":
            setattr(msg, f.name, f.sub[value])
        elif how == "repeated":
            getattr(msg, f.name).extend(value)
        elif how == "repeated_enum":
            getattr(msg, f.name).extend(f.sub[v] for v in value)
        elif how == "message":
            sub = getattr(msg, f.name)
            sub.SetInParent()
            _fill(sub, value)
        elif how == "messages":
            items = getattr(msg, f.name)
            for item in value:
                _fill(items.add(), item)
        elif how == "params":
            entries = getattr(msg, f.name)
            for k, v in value.items():
                _set_oneof(entries[k], v)


def _set_oneof(msg: Any, value: object) -> None:
    """Set the member of ``msg``'s one oneof of ``value``'s type (bool, int, float or str)."""
    kind = next((t for t in (bool, int, float, str) if isinstance(value, t)), None)
    for fd in msg.DESCRIPTOR.oneofs[0].fields:
        if kind is not None and _is_scalar(kind, fd):
            setattr(msg, fd.name, kind(value))  # type: ignore[call-overload,arg-type]
            return
    raise ValueError(f"{msg.DESCRIPTOR.full_name} has no member for {value!r}")


def _read(msg: Any, model: type[BaseModel]) -> dict[str, Any]:
    """``msg``'s fields as a document for ``model.model_validate``."""
    out: dict[str, Any] = {}
    for f in _plan(model, msg.DESCRIPTOR.full_name):
        how, value = f.how, getattr(msg, f.name)
        if how == "scalar":
            out[f.name] = value
        elif how == "optional":
            if msg.HasField(f.name):
                out[f.name] = value
        elif how == "enum":
            if value:
                out[f.name] = f.back.get(value, f"unknown value {value}")
        elif how == "repeated":
            out[f.name] = list(value)
        elif how == "repeated_enum":
            out[f.name] = [f.back.get(v, f"unknown value {v}") for v in value]
        elif how == "message":
            if msg.HasField(f.name):
                out[f.name] = _read(value, f.sub[0])
        elif how == "messages":
            out[f.name] = [_read(item, f.sub[0]) for item in value]
        elif how == "params":
            out[f.name] = {k: _oneof_value(v, f.sub) for k, v in value.items()}
    return out


def _oneof_value(msg: Any, oneof: str) -> Any:
    """The value of the member of ``oneof`` that is set (None if none is)."""
    which = msg.WhichOneof(oneof)
    return None if which is None else getattr(msg, which)


def _invalid(model: type[BaseModel], data: bytes, reason: str) -> ValidationError:
    schema = getattr(model, "SCHEMA", model.__name__)
    error = PydanticCustomError("wire_invalid", "not a {schema} record ({size} bytes): {reason}",
                                {"schema": schema, "size": len(data), "reason": reason})
    return ValidationError.from_exception_data(
        model.__name__, [InitErrorDetails(type=error, loc=(), input=data[:64])])


__all__ = ["WireModel", "check"]
