"""The published wire schemas: ``.proto`` files and the descriptor set built from them.

Every record on the bus is a Protocol Buffers (proto3) message defined in a
``.proto`` file under ``fabricops/schemas/``, one file and one package per
topic (``fabricops/telemetry/v2/telemetry.proto`` is package
``fabricops.telemetry.v2``). Those files are the contract: another language
compiles them and reads the topics. ``wire.binpb`` beside them is the
``FileDescriptorSet`` protoc builds from them (``python -m
fabricops.core.wire_compat build`` writes it again; a test checks that it
matches the ``.proto`` files); this process loads it into a pool of its own
and builds message classes from it, so no generated code is kept and the
protobuf runtime's version does not matter.

Names are shared by rule, never by position: a record's field is the proto
field of the same name, and a Python enum member ``NAME`` of enum ``Kind`` is
the proto value ``KIND_NAME`` (the proto enum named in UPPER_SNAKE_CASE,
then the member's name). Value 0 is ``..._UNSPECIFIED`` and never a member.
"""

from __future__ import annotations

import functools
import re
from enum import Enum
from importlib import resources
from typing import Any, Final

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, EnumDescriptor

SCHEMA_DIR: Final = "schemas"
DESCRIPTOR_SET: Final = "wire.binpb"
CONTENT_TYPE: Final = "application/x-protobuf"


class SchemaError(RuntimeError):
    """The schema files and the records disagree; the message names both sides."""


def schema_root() -> Any:
    """The directory of the ``.proto`` files (a ``Traversable``)."""
    return resources.files("fabricops") / SCHEMA_DIR


def proto_files() -> list[str]:
    """Every ``.proto`` file, as a path relative to ``schema_root()``, sorted."""
    found: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for child in node.iterdir():
            name = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, f"{name}/")
            elif name.endswith(".proto"):
                found.append(name)

    walk(schema_root(), "")
    return sorted(found)


@functools.cache
def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    """The committed descriptor set of every schema file."""
    data = (schema_root() / DESCRIPTOR_SET).read_bytes()
    return descriptor_pb2.FileDescriptorSet.FromString(data)


@functools.cache
def pool() -> descriptor_pool.DescriptorPool:
    """A descriptor pool holding the schemas (not the process-wide default pool)."""
    out = descriptor_pool.DescriptorPool()
    for file in descriptor_set().file:
        out.Add(file)
    return out


def message_descriptor(full_name: str) -> Descriptor:
    """The descriptor of message ``full_name``; SchemaError if no schema defines it."""
    try:
        return pool().FindMessageTypeByName(full_name)
    except KeyError:
        raise SchemaError(f"no schema under fabricops/{SCHEMA_DIR} defines message "
                          f"{full_name!r}") from None


@functools.cache
def message_class(full_name: str) -> Any:
    """The message class of ``full_name`` (built from the descriptor, not generated code)."""
    return message_factory.GetMessageClass(message_descriptor(full_name))


def upper_snake(name: str) -> str:
    """``ActionKind`` -> ``ACTION_KIND``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


@functools.cache
def enum_numbers(enum_type: EnumDescriptor, members: type[Enum]) -> dict[Any, int]:
    """Wire number of every member of ``members`` (see the module docstring).

    SchemaError names a member without a value, or a value without a member.
    """
    prefix = upper_snake(enum_type.name) + "_"
    by_name = {v.name: v.number for v in enum_type.values}
    out: dict[Any, int] = {}
    for member in members:
        number = by_name.pop(prefix + member.name, None)
        if number is None or number == 0:
            raise SchemaError(f"{members.__name__}.{member.name} has no value "
                              f"{prefix}{member.name} in proto enum {enum_type.full_name}")
        out[member] = number
    extra = sorted(set(by_name) - {prefix + "UNSPECIFIED"})
    if extra:
        raise SchemaError(f"proto enum {enum_type.full_name} values {extra} are not members "
                          f"of {members.__name__}")
    return out


__all__ = ["CONTENT_TYPE", "DESCRIPTOR_SET", "SchemaError", "descriptor_set", "enum_numbers",
           "message_class", "message_descriptor", "pool", "proto_files", "schema_root",
           "upper_snake"]
