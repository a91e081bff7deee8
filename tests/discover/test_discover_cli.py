"""``fabricops discover`` on a running simulated fabric: the file it writes runs
``fabricops up`` and its named inventory runs ``fabricops collect``; ``--against``
lists each miswire, stores it as an event and exits non-zero."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fabricops.cli.discover import EXIT_DIFFERENT
from fabricops.cli.main import app
from fabricops.core.inventory import Inventory
from fabricops.core.topology import load_topology, save_topology
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.faults import MiswireSpec
from fabricops.store.store import Store, StoreConfig
from tests.discover.fabric import link_ids, serving, shape

ENV = {"COLUMNS": "80", "FORCE_COLOR": ""}
pytestmark = pytest.mark.integration


def _write(inventory: Inventory, path: Path, named: bool = True) -> Path:
    doc = inventory.model_dump(mode="json", exclude_none=True)
    doc.pop("int", None)
    doc["targets"] = [{**t, "interval_s": 0.5} for t in doc["targets"]
                      if t["protocol"] == "snmp"]
    if not named:
        for t in doc["targets"]:
            del t["device"]
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_discovered_file_runs_up_and_named_inventory_runs_collect(tmp_path: Path) -> None:
    built = leaf_spine(gpus=32, nics_per_host=4, leaf_radix=16, spine_radix=16)
    out, named = tmp_path / "fabric.yaml", tmp_path / "named.yaml"
    with serving(built) as fabric:
        inv = _write(fabric.inventory(), tmp_path / "addresses.yaml", named=False)
        result = CliRunner().invoke(app, ["discover", "-i", str(inv), "-o", str(out),
                                          "--inventory-out", str(named)], env=ENV)
        assert result.exit_code == 0, result.output
        *summary, wrote = result.stdout.splitlines()
        assert wrote == f"wrote {out}"  # the path is as long as the user made it
        wide = [line for line in summary if len(line) > 80]
        assert not wide, wide
        assert "unresolved: none" in result.stdout
        assert "links 64: host-leaf 32, leaf-spine 32" in result.stdout
        assert "speeds: 400G x 64" in result.stdout
        collected = CliRunner().invoke(app, ["collect", "snmp", "-i", str(named), "--bus",
                                             "memory", "--duration", "3"], env=ENV)
    found = load_topology(out)
    assert link_ids(found) == link_ids(built)
    assert shape(found) == shape(built)
    assert collected.exit_code == 0, collected.output
    status = re.search(r"snmp (\d+)/(\d+) up", " ".join(collected.stderr.split()))
    assert status is not None, collected.stderr
    assert status.group(1) == status.group(2) == str(len(fabric.switches))
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(f"name: found\nduration_s: 10\ntopology: {{file: {out}}}\n")
    db = f"sqlite:///{tmp_path / 'data' / 'fabricops.db'}"
    up = CliRunner().invoke(app, ["up", str(scenario), "--duration", "3", "--speed", "5",
                                  "--snmp-interval", "1", "--db", db, "--api-port", "0",
                                  "--int-port", "0"], env={**ENV, "COLUMNS": "200"})
    assert up.exit_code == 0, up.output
    ran = re.search(r"snmp (\d+)/(\d+) up", " ".join(up.stderr.split()))
    assert ran is not None, up.stderr
    assert ran.group(1) == ran.group(2) == str(len(fabric.switches))


def test_against_lists_each_miswire_stores_events_and_exits_non_zero(tmp_path: Path) -> None:
    built = leaf_spine(gpus=32, nics_per_host=4, leaf_radix=16, spine_radix=16)
    plan = save_topology(built, tmp_path / "plan.yaml")
    db = f"sqlite:///{tmp_path / 'events.db'}"
    swapped = [(built.links[0].id, built.links[9].id), (built.links[40].id, built.links[60].id)]
    with serving(built) as fabric:
        for a, b in swapped:
            fabric.cabling.miswire(MiswireSpec(links=(a, b)))
        inv = _write(fabric.inventory(), tmp_path / "inv.yaml")
        text = CliRunner().invoke(app, ["discover", "-i", str(inv), "-o",
                                        str(tmp_path / "now.yaml"), "--against", str(plan),
                                        "--db", db], env=ENV)
        as_json = CliRunner().invoke(app, ["discover", "-i", str(inv), "-o",
                                           str(tmp_path / "now.json"), "--against", str(plan),
                                           "--json"], env=ENV)
    assert text.exit_code == EXIT_DIFFERENT, text.output
    assert "Cabling differences: 4" in text.stdout
    lines = [ln for ln in text.stdout.splitlines() if ln.lstrip().startswith("miswired")]
    assert len(lines) == 4
    assert as_json.exit_code == EXIT_DIFFERENT
    doc = json.loads(as_json.stdout)
    assert {d["entity"] for d in doc["differences"]} == {x for pair in swapped for x in pair}
    assert doc["findings"] == []
    store = Store(StoreConfig(url=db))
    store.start()
    try:
        events = store.events(t0_ns=0, t1_ns=2**62, metric="lldp_neighbor")
    finally:
        store.stop()
    assert {e.entity for e in events} == {x for pair in swapped for x in pair}


def test_unreachable_devices_and_bad_inventories_are_named(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("targets:\n  - {protocol: snmp, address: '127.0.0.1:9', "
                   "snmp: {community: x}}\n")
    result = CliRunner().invoke(app, ["discover", "-i", str(inv), "-o",
                                      str(tmp_path / "t.yaml"), "--timeout", "0.2"], env=ENV)
    assert result.exit_code == 2
    assert "no device answered" in result.stderr
    assert "device did not answer" in result.stderr
    inv.write_text("targets:\n  - {protocol: snmp, adress: '127.0.0.1:9'}\n")
    result = CliRunner().invoke(app, ["discover", "-i", str(inv)], env=ENV)
    assert result.exit_code == 2
    assert "did you mean 'address'" in result.stderr
