"""Schema changes are checked against the published baseline: what breaks a reader or
writer fails, additions pass. Broken schemas are fed to the checker on purpose."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from fabricops.core import wire_schema
from fabricops.core.wire_compat import breaking, compile_protos, load_baseline, main, snapshot
from tests.conftest import require_program

TELEMETRY = "fabricops/telemetry/v2/telemetry.proto"
EVENTS = "fabricops/events/v2/events.proto"


def current() -> dict[str, Any]:
    return snapshot(wire_schema.descriptor_set().file)


def test_the_schemas_are_compatible_with_the_baseline() -> None:
    assert breaking(load_baseline(), current()) == []


def test_the_baseline_covers_every_published_message() -> None:
    published = set(current()["messages"])
    assert published == set(load_baseline()["messages"]), (
        "a message is not in fabricops/schemas/baseline.json: run "
        "python -m fabricops.core.wire_compat baseline once it is published")


@pytest.fixture(scope="module")
def protoc() -> str:
    return require_program("protoc", "to compile the schemas fed to the compatibility check")


def edited(protoc: str, tmp_path: Path, path: str, old: str, new: str) -> dict[str, Any]:
    """The snapshot of the schemas with ``old`` replaced by ``new`` in file ``path``."""
    root = tmp_path / "schemas"
    shutil.copytree(Path(str(wire_schema.schema_root())), root)
    proto = root / path
    text = proto.read_text()
    assert text.count(old) == 1, old
    proto.write_text(text.replace(old, new))
    out = tmp_path / "edited.binpb"
    compile_protos(protoc, root, wire_schema.proto_files(), out)
    return snapshot(descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file)


@pytest.mark.parametrize(("path", "old", "new", "problem"), [
    (TELEMETRY, "uint64 seq = 5;", "uint64 seq = 10;",
     "fabricops.telemetry.v2.Frame.seq (field 5, uint64) was renumbered to 10"),
    (TELEMETRY, "uint64 seq = 5;", "int64 seq = 5;",
     "fabricops.telemetry.v2.Frame.seq (field 5, uint64) was retyped to int64"),
    (TELEMETRY, "uint64 seq = 5;", "",
     "fabricops.telemetry.v2.Frame.seq (field 5, uint64) was removed without reserving its "
     "number"),
    (TELEMETRY, "repeated fixed64 raw = 9;", "fixed64 raw = 9;",
     "fabricops.telemetry.v2.Frame.raw (field 9, repeated fixed64) was retyped to fixed64"),
    (TELEMETRY, "uint64 seq = 5;", "uint64 sequence = 5;",
     "fabricops.telemetry.v2.Frame.seq (field 5, uint64) was renamed to sequence"),
    (EVENTS, "  EVENT_KIND_CLEARED = 4;", "",
     "fabricops.events.v2.EventKind.EVENT_KIND_CLEARED (4) was removed without reserving its "
     "number"),
    (EVENTS, "EVENT_KIND_CLEARED = 4;", "EVENT_KIND_CLEARED = 5;",
     "fabricops.events.v2.EventKind.EVENT_KIND_CLEARED was renumbered from 4 to 5"),
    (EVENTS, "message Event {", "message Incident {",
     "message fabricops.events.v2.Event was removed"),
])
def test_a_breaking_change_is_named(protoc: str, tmp_path: Path, path: str, old: str,
                                    new: str, problem: str) -> None:
    assert breaking(load_baseline(), edited(protoc, tmp_path, path, old, new)) == [problem]


@pytest.mark.parametrize(("path", "old", "new"), [
    (TELEMETRY, "uint64 seq = 5;", "uint64 seq = 5;\n  string site = 10;"),
    (TELEMETRY, "uint64 seq = 5;", "reserved 5;\n  reserved \"seq\";"),
    (EVENTS, "  EVENT_KIND_CLEARED = 4;", "  EVENT_KIND_CLEARED = 4;\n  EVENT_KIND_DRIFT = 5;"),
    (EVENTS, "  EVENT_KIND_CLEARED = 4;", "  reserved 4;"),
    (EVENTS, "message Event {", "message Summary { string text = 1; }\nmessage Event {"),
])
def test_additions_and_reserved_removals_pass(protoc: str, tmp_path: Path, path: str,
                                              old: str, new: str) -> None:
    assert breaking(load_baseline(), edited(protoc, tmp_path, path, old, new)) == []


def test_a_broken_descriptor_is_caught_without_protoc() -> None:
    files = [copy.deepcopy(f) for f in wire_schema.descriptor_set().file]
    frame = next(m for f in files for m in f.message_type if m.name == "Frame")
    field = next(f for f in frame.field if f.name == "metric")
    field.number = 12
    assert breaking(load_baseline(), snapshot(files)) == [
        "fabricops.telemetry.v2.Frame.metric (field 8, repeated fixed32) was renumbered to 12"]


def test_the_command_line_check_passes_on_the_committed_schemas(protoc: str) -> None:
    assert main(["check"]) == 0
