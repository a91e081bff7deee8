"""``fabricops config check | apply | validate | drift`` against a twin served over gNMI,
as a user runs them: a wrong setting found, the plan applied, traffic judged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import Result

from fabricops.collectors.gnmi_settings import GnmiSettingsClient
from fabricops.core.topology import save_topology
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.engine import Simulator
from fabricops.simulator.faults import FaultSpec
from tests.config.test_cli import one_error_line, run
from tests.config.twin import leaf_spine_32

LINK = "leaf-0:eth9~spine-0:eth1"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    topo = leaf_spine_32()
    path = tmp_path_factory.mktemp("cfg") / "t.json"
    save_topology(topo, path)
    sim = Simulator(topo)
    sim.add_fault(FaultSpec(type="mtu_mismatch", entity=LINK))
    twin = SimulatedFabric(sim, SimulatedFabricConfig(speed=20.0))
    twin.start()
    yield path, twin.gnmi.address
    twin.stop()


def _json(result: Result) -> dict:  # type: ignore[type-arg]
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_check_apply_check_validate_drift_on_the_twin(served: tuple[Path, str]) -> None:
    path, address = served
    first = run("config", "check", "-t", str(path), "--gnmi", address, "--json")
    assert first.exit_code == 1, first.output
    doc = _json(first)
    mtu = [f for f in doc["findings"] if f["check"] == "mtu_link"]
    assert mtu == [{"check": "mtu_link", "device": "spine-0", "port": "eth1",
                    "setting": "mtu_bytes", "found": "1500", "expected": "9100",
                    "note": "peer leaf-0:eth9 has 9100"}]
    assert doc["unread"]["host-000"].startswith("NIC settings")

    table = run("config", "check", "-t", str(path), "--gnmi", address)
    assert table.exit_code == 1
    assert all(len(line) <= 80 for line in table.stdout.splitlines())
    assert "mtu_link" in table.stdout
    assert "spine-0:eth1" in table.stdout

    observe = run("config", "apply", "-t", str(path), "--gnmi", address, "--mode", "observe",
                  "--json")
    assert observe.exit_code == 0
    assert _json(observe)["state"] == "proposed"
    applied = run("config", "apply", "-t", str(path), "--gnmi", address, "--json")
    assert applied.exit_code == 0, applied.output
    out = _json(applied)
    assert out["state"] == "verified"
    assert out["settings"] > 0
    assert [e["state"] for e in out["action"]["audit"]] == ["proposed", "approved", "applied",
                                                            "verified"]
    again = run("config", "apply", "-t", str(path), "--gnmi", address, "--json")
    assert _json(again)["state"] == "nothing to change"
    assert run("config", "check", "-t", str(path), "--gnmi", address).exit_code == 0

    valid = run("config", "validate", "-t", str(path), "--gnmi", address, "--bursts", "2",
                "--json")
    assert valid.exit_code == 0, valid.output
    report = _json(valid)
    assert report["ok"]
    assert {r["measurement"]["pattern"] for r in report["results"]} == {
        "all_to_all", "ring"}
    assert all(r["measurement"]["drops"] == 0 for r in report["results"])

    drift = run("config", "drift", "-t", str(path), "--gnmi", address, "--once")
    assert drift.exit_code == 0
    assert not drift.stdout.strip()


def test_validate_judges_real_hosts_outputs_and_refuses_garbage(
        served: tuple[Path, str], tmp_path: Path) -> None:
    path, _ = served
    good = tmp_path / "bw.txt"
    good.write_text(" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate\n"
                    " 65536 1000 201.0 200.0 0.4\n")
    low = run("config", "validate", "-t", str(path), "--bursts", "2", "--ib-write-bw",
              str(good))
    assert low.exit_code == 1
    assert "50% of 400G" in low.stdout
    bad = tmp_path / "nccl.txt"
    bad.write_text("NCCL WARN connection refused\n")
    assert "no result row" in one_error_line(
        run("config", "validate", "-t", str(path), "--nccl", str(bad)))


def test_missing_or_double_source_is_one_error_line(served: tuple[Path, str]) -> None:
    path, address = served
    assert "--gnmi HOST:PORT" in one_error_line(run("config", "check", "-t", str(path)))
    assert "not both" in one_error_line(run("config", "check", "-t", str(path), "--gnmi",
                                            address, "-i", str(path)))
    assert "no switch could be read" in one_error_line(
        run("config", "check", "-t", str(path), "--gnmi", "127.0.0.1:1"))


def test_drift_names_a_changed_setting_and_restore_puts_it_back(
        served: tuple[Path, str]) -> None:
    path, address = served
    assert run("config", "apply", "-t", str(path), "--gnmi", address).exit_code == 0
    client = GnmiSettingsClient({"leaf-3": address})
    client.write("leaf-3", {"ports.eth2.ecn.enabled": False})
    found = run("config", "drift", "-t", str(path), "--gnmi", address, "--once")
    assert found.exit_code == 1
    assert "leaf-3 on 1 port(s): ecn.enabled is False, intent True" in found.stdout
    assert "diagnosis drift-" in found.stdout
    fixed = run("config", "drift", "-t", str(path), "--gnmi", address, "--once", "--restore")
    assert "restore_config leaf-3 -> applied" in fixed.stdout
    assert client.read("leaf-3").values["ports.eth2.ecn.enabled"] is True
    assert run("config", "drift", "-t", str(path), "--gnmi", address, "--once").exit_code == 0
