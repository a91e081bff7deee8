"""``fabricops probes plan`` through the command line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner, Result

from fabricops.cli.main import app
from fabricops.core.topology import save_topology
from fabricops.simulator.builders import fat_tree

PLAIN_ENV: dict[str, str | None] = {"FORCE_COLOR": None, "TTY_COMPATIBLE": None,
                                    "COLUMNS": "160"}


def run(*args: str) -> Result:
    return CliRunner(env=PLAIN_ENV).invoke(app, list(args))


def test_plan_on_a_topology_file_as_json(tmp_path: Path) -> None:
    path = save_topology(fat_tree(k=4), tmp_path / "ft.json")
    result = run("probes", "plan", "--topology", str(path), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["coverage"] == 1.0
    assert report["links"] == report["one_probe_per_link"] == 48
    assert report["plan_size"] == len(report["probes"]) < 48
    assert report["random_probes_for_coverage"] >= report["plan_size"]
    assert report["uncovered"] == []


def test_plan_on_the_demo_preset_prints_the_comparison() -> None:
    result = run("probes", "plan", "--switch-links-only")
    assert result.exit_code == 0, result.output
    for needle in ("INT probe plan: leaf_spine", "plan: probe flows", "100.00%",
                   "one probe per link", "random probes for the same coverage (mean of 5)"):
        assert needle in result.stdout


def test_preset_and_topology_are_exclusive(tmp_path: Path) -> None:
    result = run("probes", "plan", "--preset", "demo", "--topology", str(tmp_path / "t.json"))
    assert result.exit_code == 2
    assert "give either --preset (demo) or --topology" in result.stderr
