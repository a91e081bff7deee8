"""``fabricops config plan|render`` as a user runs them: tables, JSON, files, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from fabricops.cli.main import app
from fabricops.core.topology import save_topology
from fabricops.simulator.builders import leaf_spine

NARROW: dict[str, str | None] = {"FORCE_COLOR": None, "TTY_COMPATIBLE": None, "COLUMNS": "80"}


def run(*args: str) -> Result:
    return CliRunner(env=NARROW).invoke(app, list(args))


@pytest.fixture
def topo_file(tmp_path: Path) -> Path:
    path = tmp_path / "t.json"
    save_topology(leaf_spine(gpus=64, name="gpu64"), path)
    return path


def one_error_line(result: Result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_plan_table_fits_80_columns(topo_file: Path) -> None:
    result = run("config", "plan", "--topology", str(topo_file))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Template roce-lossless-2tier-400g for gpu64" in out
    assert "DSCP 26 -> TC 3" in out
    assert "leaf=11, spine=23" in out
    assert "leaf-0..leaf-1" in out
    assert "host-000..host-007" in out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 80


def test_plan_json_has_every_device(topo_file: Path) -> None:
    result = run("config", "plan", "-t", str(topo_file), "--json", "--set", "mtu=4200")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["template"]["name"] == "roce-lossless-2tier-400g"
    assert doc["fabric"]["mtu_bytes"] == 4200
    assert [s["device"] for s in doc["switches"]] == ["leaf-0", "leaf-1", "spine-0"]
    assert len(doc["hosts"]) == 8
    assert doc["switches"][0]["ports"][0]["headroom_bytes"] > 0


def test_render_writes_files_and_one_summary(topo_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "cfg"
    result = run("config", "render", "-t", str(topo_file), "--platform", "nvue",
                 "--out", str(out))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Wrote 3 nvue configuration(s) to {out}/ (template "
                               "roce-lossless-2tier-400g): leaf-0.nvue.sh, leaf-1.nvue.sh, "
                               "spine-0.nvue.sh")
    assert sorted(p.name for p in out.iterdir()) == ["leaf-0.nvue.sh", "leaf-1.nvue.sh",
                                                     "spine-0.nvue.sh"]


def test_render_json_lists_what_is_not_rendered(topo_file: Path, tmp_path: Path) -> None:
    result = run("config", "render", "-t", str(topo_file), "-p", "openconfig",
                 "-o", str(tmp_path / "oc"), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(doc["files"]) == 3
    assert doc["platform"] == "openconfig"
    assert any("PFC" in line for line in doc["not_rendered"])


def test_missing_topology_is_one_line(tmp_path: Path) -> None:
    line = one_error_line(run("config", "plan", "--topology", str(tmp_path / "x.json")))
    assert line.startswith(f"error: --topology {tmp_path / 'x.json'}: cannot read topology file")


def test_bad_override_is_one_line(topo_file: Path) -> None:
    line = one_error_line(run("config", "plan", "-t", str(topo_file), "--set", "mtu=20000"))
    assert line == "error: mtu_bytes: Input should be less than or equal to 9214"
    line = one_error_line(run("config", "plan", "-t", str(topo_file), "--set", "mtu"))
    assert line == "error: --set 'mtu' is not of the form key=value"


def test_bad_platform_and_unsupported_mode_are_one_line(topo_file: Path,
                                                        tmp_path: Path) -> None:
    line = one_error_line(run("config", "render", "-t", str(topo_file), "-p", "junos",
                              "-o", str(tmp_path)))
    assert line == ("error: --platform junos: unknown platform; known: openconfig, sonic, "
                    "eos, nvue, host")
    line = one_error_line(run("config", "render", "-t", str(topo_file), "-p", "eos",
                              "-o", str(tmp_path), "--set", "load_balancing=adaptive"))
    assert line.startswith("error: eos: load_balancing=adaptive is not in this template")


@pytest.mark.parametrize("command", ["plan", "render"])
def test_help_teaches_with_an_example(command: str) -> None:
    result = run("config", command, "--help")
    assert result.exit_code == 0
    assert "fabricops config" in result.stdout
    assert "--topology" in result.stdout
