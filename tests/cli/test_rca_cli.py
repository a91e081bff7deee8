"""``fabricops rca``: eval prints the table beside the baselines; bad model files are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricops.cli.main import app
from fabricops.rca.model import DEFAULT_MODEL

runner = CliRunner()


def test_eval_on_a_few_scenarios_reports_every_method_and_saves_json(tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    result = runner.invoke(app, ["rca", "eval", "--model", str(DEFAULT_MODEL), "--scenarios", "2",
                                 "--split", "all", "--family", "fat_tree", "--size", "4",
                                 "--faults", "2", "--soak-runs", "1", "--soak-seconds", "30",
                                 "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary == json.loads(out.read_text())
    assert summary["scenarios"] == 2
    assert summary["faults"] == 4
    assert summary["healthy_runs"] == 1
    assert summary["shapes"] == ["fat_tree k=4 1:1"]
    assert 0 <= summary["unobservable"] <= 4
    assert set(summary["methods"]) == {"model", "rules", "votes"}
    for m in summary["methods"].values():
        top1, top3 = m["top1"], m["top3"]
        assert top1["n"] == top3["n"] == summary["counted"]
        if top1["n"]:
            assert 0.0 <= top1["low"] <= top1["rate"] <= top1["high"] <= 1.0
            assert top1["rate"] <= top3["rate"]
        assert set(m["per_type"]) >= {"gray_loss", "pfc_storm", "hash_polarization"}
    assert summary["reliability"][0]["bin"] == "0.50-0.60"


@pytest.mark.parametrize(("args", "message"), [
    (["--family", "torus"], "unknown topology family torus"),
    (["--faults", "4"], "less than or equal to 3"),
    (["--split", "everything"], "split"),
    (["--family", "fat_tree", "--size", "5"], "k=5"),
    (["--size", "-3"], "gpus=-3"),
    (["--oversubscription", "0"], "oversubscription"),
    (["--fault-type", "meteor_strike"], "meteor_strike"),
])
def test_eval_names_an_option_that_cannot_be_used(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["rca", "eval", "--model", str(DEFAULT_MODEL), "--scenarios", "1",
                                 "--soak-runs", "0", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_eval_refuses_a_file_that_is_not_a_model(tmp_path: Path) -> None:
    bad = tmp_path / "model.rcamodel"
    bad.write_text("not a model")
    result = runner.invoke(app, ["rca", "eval", "--model", str(bad), "--scenarios", "1"])
    assert result.exit_code == 2
    assert "model.rcamodel" in result.output
