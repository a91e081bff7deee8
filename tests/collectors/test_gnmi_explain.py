"""Unmapped paths are counted per normalised path, bounded, and shown by
``fabricops collect --explain`` at 80 columns."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry
from pygnmi.spec.v080 import gnmi_pb2
from typer.testing import CliRunner

from fabricops.cli.main import app
from fabricops.collectors.gnmi_dialects import resolver_of
from fabricops.collectors.gnmi_explain import OTHER, TargetBook, render_explain
from fabricops.collectors.gnmi_mapping import NotificationMapper
from fabricops.collectors.gnmi_metrics import PATH_LABELS_PER_DEVICE, GnmiMetrics
from fabricops.core.openconfig import parse_path
from tests.collectors.gnmi_replay import ReplayTarget, load_replay, notification

ENV = {"COLUMNS": "80", "FORCE_COLOR": ""}


def test_unmapped_paths_are_normalised_so_their_number_stays_bounded() -> None:
    mapper = NotificationMapper("sw", "openconfig")
    notes = [notification({"prefix": {"path": f"/interfaces/interface[name=Ethernet{i}]"},
                           "update": [{"path": "vendor-ext", "json_ietf": {"x": "1"}}]})
             for i in range(128)]
    notes.append(notification({"prefix": {"path": "openconfig:/system"}, "update": [
        {"path": "state/hostname", "string": "sw"},
        {"path": "openconfig-system:state/domain-name", "string": "lab"}]}))
    found: dict[str, int] = {}
    for i, note in enumerate(notes):
        for path, n in mapper.map(note, i, 1).unmapped_paths.items():
            found[path] = found.get(path, 0) + n
    assert found == {"/interfaces/interface/vendor-ext/x": 128,
                     "openconfig:/system/state/hostname": 1,
                     "openconfig:/system/state/domain-name": 1}
    sonic = resolver_of("sonic")
    assert sonic.normalise("", parse_path("/COUNTERS/Ethernet4/Queues/Ethernet4:9/NEW")) == \
        "/COUNTERS/*/Queues/*/NEW"


def test_path_tallies_and_metric_labels_are_bounded() -> None:
    book = TargetBook("sw", "openconfig", limit=20)
    metrics = GnmiMetrics(CollectorRegistry())
    for i in range(300):
        mapped = NotificationMapper("sw").map(notification({"update": [
            {"path": f"/vendor/thing{i}/leaf", "uint": 1}]}), i, 1)
        book.record(mapped)
        metrics.observe_leaves("sw", mapped)
    counts = book.explain().unmapped
    assert len(counts) == 21
    assert counts[OTHER] == 280
    labels = {s.labels["path"] for m in metrics.unmapped.collect() for s in m.samples}
    assert len(labels) == PATH_LABELS_PER_DEVICE + 1
    assert OTHER in labels


def test_the_report_names_profile_counts_and_paths_within_80_columns() -> None:
    book = TargetBook("leaf-17", "arista_eos")
    mapper = NotificationMapper("leaf-17", "arista_eos")
    replay = load_replay("arista_eos")
    for i, note in enumerate(replay.notifications):
        book.record(mapper.map(note, i, 1))
    long = "/" + "/".join(f"very-long-container-name-{i}" for i in range(8))
    book.unmapped.add(long, 3)
    text = render_explain([book.explain()])
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert lines[0].split() == ["target", "profile", "leaves", "mapped", "unsupp.",
                                "unmapped", "bad"]
    assert lines[1].split() == ["leaf-17", "arista_eos", "44", "52.3%", "20", "4", "0"]
    assert lines[2] == "1 target, 1 healthy; details of 1 below"
    assert "leaf-17  profile arista_eos  healthy" in lines
    assert "  leaves received             44" in lines
    assert any(line.startswith("  mapped                      23 (52.3 %)") for line in lines)
    assert any("eos_native:/Kernel/sysinfo/uptime" in line and line.split()[0] == "1"
               for line in lines)
    gap = lines.index("             9  /interfaces/interface/state")
    assert lines[gap + 1] == "                  (interface attributes other than oper-status)"
    assert any("..." in line and line.split()[0] == "3" for line in lines)


def test_collect_explain_prints_what_each_targets_leaves_became(tmp_path: Path) -> None:
    replay = load_replay("arista_eos")
    target = ReplayTarget(replay.responses).start()
    junos = ReplayTarget(load_replay("junos").responses).start()
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(
        "targets:\n"
        f"  - {{device: leaf1, protocol: gnmi, address: '{target.address}', interval_s: 1,"
        " gnmi: {profile: arista_eos}}\n"
        f"  - {{device: leaf2, protocol: gnmi, address: '{junos.address}', interval_s: 1,"
        " gnmi: {profile: srlinux}}\n")
    try:
        result = CliRunner().invoke(app, ["collect", "gnmi", "-i", str(inventory), "--bus",
                                          "memory", "--duration", "1.5", "--explain"], env=ENV)
    finally:
        target.stop()
        junos.stop()
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "leaf1  profile arista_eos  healthy" in out
    assert "leaf2  profile srlinux  UNHEALTHY" in out
    assert "eos_native:/Kernel/sysinfo/uptime" in out
    assert "reason: leaf2: none of the last 62 leaf updates mapped" in out
    assert all(len(line) <= 80 for line in out.splitlines())
    assert target.requests[0].subscribe.encoding == gnmi_pb2.JSON_IETF


def test_targets_whose_every_leaf_mapped_take_one_line_each() -> None:
    quiet = [TargetBook(f"host-{i:03}", "openconfig").explain() for i in range(3)]
    text = render_explain(quiet)
    lines = text.splitlines()
    assert len(lines) == 5
    assert lines[-1] == "3 targets, 3 healthy; every leaf mapped"
