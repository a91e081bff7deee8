"""Compatibility of the wire schemas with the published baseline.

``schemas/baseline.json`` records, for every message and enum of the published
schemas, each field's number with its name and type (``"2": "device string"``,
``"8": "ranked repeated fabricops.diagnoses.v2.RankedEntity"``), each enum
value's number, and what is reserved. ``breaking(baseline, snapshot(files))`` lists the changes
that would break a reader or writer built from the baseline:

- a message or enum removed;
- a field renumbered (its name now has another number), retyped, renamed,
  moved between singular and repeated, or removed without reserving its
  number;
- an enum value renumbered, renamed, or removed without reserving its number.

Adding messages, fields, enums and values is compatible. A change that must
break moves the schema to a new package version (``fabricops.telemetry.v3``)
and topic, and the baseline is rewritten on purpose (``baseline`` below).

    python -m fabricops.core.wire_compat build     # protoc: .proto -> wire.binpb
    python -m fabricops.core.wire_compat check     # exit 1 on a breaking change
    python -m fabricops.core.wire_compat baseline  # record the current schemas
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from google.protobuf import descriptor_pb2

from fabricops.core import wire_schema

BASELINE: Final = "baseline.json"
_FDP = descriptor_pb2.FieldDescriptorProto
_TYPES: Final = {number: name.removeprefix("TYPE_").lower()
                 for name, number in _FDP.Type.items()}


def compile_protos(protoc: str, root: Path, files: Sequence[str], out: Path) -> None:
    """Run ``protoc`` on ``files`` (relative to ``root``), writing a descriptor set to ``out``.

    RuntimeError carries protoc's own message when it refuses.
    """
    done = subprocess.run([protoc, f"-I{root}", f"--descriptor_set_out={out}", *files],
                          cwd=root, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"protoc failed on {list(files)}: {done.stderr.strip()}")


def snapshot(files: Iterable[descriptor_pb2.FileDescriptorProto]) -> dict[str, Any]:
    """What the baseline records of ``files`` (see the module docstring)."""
    messages: dict[str, Any] = {}
    enums: dict[str, Any] = {}

    def walk(prefix: str, msgs: Iterable[Any], enum_types: Iterable[Any]) -> None:
        for e in enum_types:
            enums[f"{prefix}.{e.name}"] = {
                "values": {v.name: v.number for v in e.value},
                "reserved": sorted([r.start, r.end] for r in e.reserved_range)}
        for m in msgs:
            name = f"{prefix}.{m.name}"
            messages[name] = {
                "fields": {str(f.number): _field_line(f) for f in m.field},
                "reserved": sorted([r.start, r.end - 1] for r in m.reserved_range)}
            walk(name, m.nested_type, m.enum_type)

    for file in files:
        walk(file.package, file.message_type, file.enum_type)
    return {"messages": dict(sorted(messages.items())), "enums": dict(sorted(enums.items()))}


def _field_line(f: descriptor_pb2.FieldDescriptorProto) -> str:
    """``name [repeated ]type``: the type is the message or enum name, else the scalar's."""
    kind = f.type_name.lstrip(".") or _TYPES[f.type]
    return f"{f.name} repeated {kind}" if f.label == _FDP.LABEL_REPEATED else f"{f.name} {kind}"


def breaking(baseline: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The breaking changes from ``baseline`` to ``current``, one readable line each."""
    problems: list[str] = []
    for name, old in baseline["messages"].items():
        new = current["messages"].get(name)
        if new is None:
            problems.append(f"message {name} was removed")
        else:
            problems += _message_changes(name, old, new)
    for name, old in baseline["enums"].items():
        new = current["enums"].get(name)
        if new is None:
            problems.append(f"enum {name} was removed")
        else:
            problems += _enum_changes(name, old, new)
    return problems


def _reserved(ranges: list[list[int]], number: int) -> bool:
    return any(lo <= number <= hi for lo, hi in ranges)


def _message_changes(name: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out: list[str] = []
    number_of = {line.split(" ", 1)[0]: int(n) for n, line in new["fields"].items()}
    for number, line in old["fields"].items():
        field, kind = line.split(" ", 1)
        was = f"{name}.{field} (field {number}, {kind})"
        now = new["fields"].get(number)
        moved = number_of.get(field)
        if moved is not None and moved != int(number):
            out.append(f"{was} was renumbered to {moved}")
        elif now is None:
            if not _reserved(new["reserved"], int(number)):
                out.append(f"{was} was removed without reserving its number")
        elif now.split(" ", 1)[0] != field:
            out.append(f"{was} was renamed to {now.split(' ', 1)[0]}")
        elif now != line:
            out.append(f"{was} was retyped to {now.split(' ', 1)[1]}")
    return out


def _enum_changes(name: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out: list[str] = []
    name_of = {n: v for v, n in new["values"].items()}
    for value, number in old["values"].items():
        now = new["values"].get(value)
        if now is not None and now != number:
            out.append(f"{name}.{value} was renumbered from {number} to {now}")
        elif now is None and number in name_of:
            out.append(f"{name}.{value} ({number}) was renamed to {name_of[number]}")
        elif now is None and not _reserved(new["reserved"], number):
            out.append(f"{name}.{value} ({number}) was removed without reserving its number")
    return out


def load_baseline() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((wire_schema.schema_root() / BASELINE).read_text())
    return doc


def main(argv: Sequence[str]) -> int:
    """The command line of the module docstring; returns the exit code."""
    root = Path(str(wire_schema.schema_root()))
    command = argv[0] if argv else "check"
    if command == "build":
        compile_protos("protoc", root, wire_schema.proto_files(), root / wire_schema.DESCRIPTOR_SET)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "schemas.binpb"
        compile_protos("protoc", root, wire_schema.proto_files(), fresh)
        current = snapshot(descriptor_pb2.FileDescriptorSet.FromString(fresh.read_bytes()).file)
    if command == "baseline":
        (root / BASELINE).write_text(json.dumps(current, indent=1) + "\n")
        return 0
    problems = breaking(load_baseline(), current)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
