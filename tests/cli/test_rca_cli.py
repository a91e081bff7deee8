"""``fabricops rca``: eval prints the table beside the baselines; bad model files are named."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fabricops.cli.main import app
from fabricops.rca.model import DEFAULT_MODEL

runner = CliRunner()


def test_eval_on_a_few_held_out_scenarios_reports_every_method() -> None:
    result = runner.invoke(app, ["rca", "eval", "--model", str(DEFAULT_MODEL), "--scenarios", "4",
                                 "--healthy-runs", "1", "--healthy-seconds", "30", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["scenarios"] == 4
    assert set(summary["methods"]) == {"model", "rules", "votes"}
    assert 0 <= summary["untouched"] <= 4
    for m in summary["methods"].values():
        assert 0.0 <= m["top1"] <= m["top3"] <= 1.0
        assert 0.0 <= m["top1_touched"] <= m["top3_touched"] <= 1.0
        assert set(m["per_type"]) >= {"gray_loss", "pfc_storm", "hash_polarization"}


def test_eval_refuses_a_file_that_is_not_a_model(tmp_path: Path) -> None:
    bad = tmp_path / "model.rcamodel"
    bad.write_text("not a model")
    result = runner.invoke(app, ["rca", "eval", "--model", str(bad), "--scenarios", "1"])
    assert result.exit_code == 2
    assert "model.rcamodel" in result.output
