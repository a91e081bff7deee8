"""``fabricops agent``: teaching help, one-line errors, one sample on a recorded tree."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fabricops.cli.main import app
from tests.agent.conftest import FIXTURES

ENV = {"COLUMNS": "200"}


def test_help_shows_an_example_and_the_tree_layout() -> None:
    result = CliRunner().invoke(app, ["agent", "--help"], env=ENV)
    assert result.exit_code == 0
    assert "fabricops agent --root tests/agent/fixtures/mlx5 --host gpu-017 --once" in result.output
    assert "DIR/ethtool/IF/statistics" in result.output


def test_once_prints_one_frame_of_the_tree() -> None:
    result = CliRunner().invoke(app, ["agent", "--root", str(FIXTURES / "mlx5"), "--host",
                                      "gpu-017", "--once"], env=ENV)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["device"], doc["source"]) == ("gpu-017", "host")
    cnp = {s["entity"]: s["value"] for s in doc["samples"] if s["metric"] == "cnp_sent"}
    assert cnp == {"gpu-017:nic0": 42000, "gpu-017:nic1": 43000}


def test_a_missing_root_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["agent", "--root", str(tmp_path / "nope"), "--once"],
                                env=ENV)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"error: --root {tmp_path / 'nope'}: "
                                                  f"no such directory"]


def test_a_host_without_rdma_devices_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["agent", "--root", str(tmp_path), "--once"], env=ENV)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: no RDMA devices found under {tmp_path}")


def test_a_bad_nic_name_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["agent", "--root", str(FIXTURES / "mlx5"), "--nic",
                                      "mlx5_0", "--once"], env=ENV)
    assert result.exit_code == 2
    assert "--nic" in result.stderr
    assert "DEVICE=NAME" in result.stderr
