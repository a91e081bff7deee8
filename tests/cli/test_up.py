"""``fabricops up`` runs the fabric and its collectors; ``collect`` refuses bad input clearly."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricops.cli.main import app
from fabricops.cli.up import on_wall_clock
from fabricops.simulator.scenario import Scenario, build_simulator

ENV = {"COLUMNS": "200", "FORCE_COLOR": ""}


def test_up_collects_every_protocol_from_the_simulated_fabric(tmp_path: Path) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(
        "name: small\nseed: 1\nduration_s: 10\n"
        "topology: {builder: leaf_spine, params: {gpus: 64}}\n"
        "jobs: [{name: job-a, hosts: 6, compute_s: 0.0, comm_bytes_per_nic: 1.0e+15}]\n")
    db = f"sqlite:///{tmp_path / 'data' / 'fabricops.db'}"
    result = CliRunner().invoke(app, ["up", str(scenario), "--duration", "4", "--speed", "5",
                                      "--snmp-interval", "1", "--db", db, "--api-port", "0",
                                      "--int-port", "0"], env=ENV)
    assert result.exit_code == 0, result.output
    line = " ".join(result.stderr.split())
    snmp = re.search(r"snmp (\d+)/(\d+) up ([\d,]+) frames", line)
    gnmi = re.search(r"gnmi (\d+)/(\d+) up ([\d,]+) frames", line)
    reports = re.search(r"int ([\d,]+) reports", line)
    assert snmp is not None, line
    assert gnmi is not None, line
    assert reports is not None, line
    assert snmp.group(1) == snmp.group(2), "every SNMP target answered"
    assert gnmi.group(1) == gnmi.group(2), "every gNMI target streamed"
    assert int(snmp.group(2)) >= 2
    assert int(gnmi.group(3).replace(",", "")) >= int(gnmi.group(2))
    assert int(reports.group(1).replace(",", "")) > 0
    piped = re.search(r"pipeline ([\d,]+) frames", line)
    assert piped is not None, line
    assert int(piped.group(1).replace(",", "")) > 0, "the pipeline kept what was collected"
    shown = CliRunner().invoke(app, ["query", "series", "leaf-0:eth1", "in_octets", "--db", db,
                                     "--json"], env=ENV)
    assert shown.exit_code == 0, shown.output
    assert len(json.loads(shown.stdout)["ts_ns"]) > 0


def test_collect_names_a_misspelled_inventory_key(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("targets:\n  - {device: leaf-0, protocol: snmp, address: '127.0.0.1:161',"
                   " snmp: {comunity: public}}\n")
    result = CliRunner().invoke(app, ["collect", "snmp", "-i", str(inv), "--bus", "memory"],
                                env=ENV)
    assert result.exit_code == 2
    assert "snmp.comunity: unknown key (did you mean 'community'?)" in result.stderr


def test_collect_refuses_an_unknown_protocol(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["collect", "netconf", "-i", str(tmp_path / "x.yaml")],
                                env=ENV)
    assert result.exit_code == 2
    assert "unknown protocol 'netconf'" in result.stderr


def test_up_heals_a_pfc_storm_through_the_collectors_and_gnmi_set(tmp_path: Path) -> None:
    scenario = tmp_path / "storm.yaml"
    scenario.write_text(
        "name: storm\nseed: 3\nduration_s: 600\n"
        "topology: {builder: leaf_spine, params: {gpus: 64, nics_per_host: 4, leaf_radix: 16,"
        " spine_radix: 16}}\n"
        "jobs: [{name: job-a, hosts: 12, placement: random, compute_s: 0.2,"
        " comm_bytes_per_nic: 2.0e+10}]\n"
        "faults: [{type: pfc_storm, entity: 'host-003:nic1', start_s: 20}]\n")
    db = f"sqlite:///{tmp_path / 'f.db'}"
    result = CliRunner().invoke(app, ["up", str(scenario), "--duration", "25", "--speed", "2",
                                      "--snmp-interval", "1", "--db", db, "--remediation",
                                      "auto", "--actuator", "gnmi", "--api-port", "0",
                                      "--int-port", "0"], env=ENV)
    assert result.exit_code == 0, result.output
    listed = CliRunner().invoke(app, ["actions", "list", "--db", db, "--json"], env=ENV)
    assert listed.exit_code == 0, listed.output
    actions = json.loads(listed.stdout)
    storm = [a for a in actions if a["target"] == "host-003:nic1"]
    assert len(storm) == 1, actions
    assert storm[0]["kind"] == "isolate_port"
    assert storm[0]["state"] in ("applied", "verified")
    applied = next(e for e in storm[0]["audit"] if e["state"] == "applied")
    assert applied["actor"] == "actuator:gnmi,simulator", "the port was shut over gNMI Set"


def test_up_restores_a_misconfigured_ecn_profile(tmp_path: Path) -> None:
    scenario = tmp_path / "ecn.yaml"
    scenario.write_text(
        "name: ecn\nseed: 7\nduration_s: 600\n"
        "topology: {builder: leaf_spine, params: {gpus: 64, nics_per_host: 4, leaf_radix: 16,"
        " spine_radix: 16}}\n"
        "jobs: [{name: job-a, hosts: 16, placement: random, compute_s: 0.2,"
        " comm_bytes_per_nic: 2.0e+10}]\n"
        "faults: [{type: ecn_misconfig, entity: leaf-1, start_s: 15}]\n")
    db = f"sqlite:///{tmp_path / 'f.db'}"
    result = CliRunner().invoke(app, ["up", str(scenario), "--duration", "25", "--speed", "2",
                                      "--snmp-interval", "1", "--db", db, "--remediation",
                                      "auto", "--api-port", "0", "--int-port", "0"], env=ENV)
    assert result.exit_code == 0, result.output
    listed = CliRunner().invoke(app, ["actions", "list", "--db", db, "--json"], env=ENV)
    actions = [a for a in json.loads(listed.stdout) if a["target"] == "leaf-1"]
    assert [a["kind"] for a in actions] == ["restore_config"], actions
    assert actions[0]["state"] in ("applied", "verified"), actions[0]["audit"]


@pytest.mark.parametrize("tick_s", [0.1, 1.0, 2.5])
def test_a_live_twin_stamps_no_frame_ahead_of_the_wall_clock(tick_s: float) -> None:
    """The driver simulates a tick when its wall-clock period starts and stamps its frame
    at the tick's end: the clock starts a tick early, so that stamp is never in the
    future, and lags the wall clock by less than a tick."""
    scenario = Scenario.model_validate({
        "tick_s": tick_s, "topology": {"builder": "leaf_spine", "params": {"gpus": 16}}})
    sim = build_simulator(on_wall_clock(scenario))
    sim.step()
    published = time.time_ns()
    stamp = sim.frames()[0].ts_ns
    assert stamp <= published
    assert published - stamp < round(tick_s * 1e9) + 1_000_000_000  # building took < 1 s
    assert stamp % round(tick_s * 1e9) == 0
