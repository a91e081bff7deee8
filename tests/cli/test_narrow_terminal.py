"""Every listing reads at 80 columns: no line overflows, ids and times appear whole,
and what was hidden is named."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from fabricops.cli.main import app
from fabricops.cli.render import faults
from fabricops.cli.tables import ALWAYS, Col, listing
from tests.cli.test_actions_cli import db  # noqa: F401  (fixture: a store of actions)
from tests.cli.test_query_cli import db as events_db  # noqa: F401  (fixture)

NARROW = {"COLUMNS": "80", "FORCE_COLOR": "", "USER": "dana"}


def narrow(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env=NARROW)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    too_wide = [line for line in lines if len(line) > 80]
    assert not too_wide, too_wide
    return result.stdout


def test_actions_list_and_show_at_80_columns(db: str) -> None:  # noqa: F811
    out = narrow("actions", "list", "--db", db)
    for whole in ("act-p", "leaf-0:eth1--spine-1:eth3", "2026-01-01 00:00:50", "proposed"):
        assert whole in out, whole
    assert "not shown:" in out
    assert "(--json has all)" in out
    out = narrow("actions", "show", "act-x", "--db", db)
    assert "undo steps (filled as steps are applied): 2" in out
    assert "2026-01-01 00:00:22" in out


def test_events_at_80_columns(events_db: str) -> None:  # noqa: F811
    out = narrow("query", "events", "--db", events_db)
    assert "agg-0-0:eth1" in out
    assert "state_change" in out


def test_topology_presets_and_plan_at_80_columns(tmp_path: Path) -> None:
    topology = tmp_path / "t.json"
    narrow("sim", "topology", "build", "fat_tree", "--set", "k=4", "-o", str(topology))
    out = narrow("sim", "topology", "show", str(topology))
    assert "links" in out
    narrow("sim", "presets")
    narrow("config", "plan", "--topology", str(topology))


def test_ground_truth_faults_at_80_columns() -> None:
    console = Console(file=io.StringIO(), width=80, force_terminal=False)
    faults(console, [{"fault_id": 7, "type": "pfc_storm",
                          "entity": "rail-3-leaf-12:eth64~host-1023:mlx5_7",
                      "start_s": 12.0, "end_s": None}])
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "rail-3-leaf-12:eth64~host-1023:mlx5_7" in text.replace("\n", "").replace(" ", "")
    assert max(len(line) for line in text.splitlines()) <= 80


@pytest.mark.parametrize("width", [40, 80, 120])
def test_a_listing_hides_the_least_useful_columns_first(width: int) -> None:
    cols = (Col("id", ALWAYS), Col("when", 6), Col("what", 4), Col("note", 2, free_text=True))
    rows = [("act-" + "f" * 20, "2026-01-01 00:00:50", "drain_link leaf-0:eth1",
             "a long note that can wrap over several lines without harm")] * 3
    console = Console(file=io.StringIO(), width=width, force_terminal=False)
    console.print(listing("actions", cols, rows, width))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert max(len(line) for line in text.splitlines()) <= width
    assert "act-" + "f" * 20 in text, "an id is never cut"
    hidden = set(text.split("not shown: ")[1].split(" (--json")[0].split(", ")
                 if "not shown: " in text else [])
    by_use = ["note", "what", "when"]  # the order they go in, least useful first
    assert hidden in [set(by_use[:k]) for k in range(len(by_use) + 1)], hidden
    assert (width >= 120) == (not hidden)


def as_json(*args: str) -> Any:
    result = CliRunner().invoke(app, [*args, "--json"], env=NARROW)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_listing_commands_speak_json_for_scripts(tmp_path: Path) -> None:
    presets = as_json("sim", "presets")
    assert {"preset", "description"} <= set(presets[0])
    topology = tmp_path / "t.json"
    narrow("sim", "topology", "build", "fat_tree", "--set", "k=4", "-o", str(topology))
    shown = as_json("sim", "topology", "show", str(topology), "-l", "3")
    assert shown["counts"]["links"] == 48
    assert len(shown["links"]) == 3
