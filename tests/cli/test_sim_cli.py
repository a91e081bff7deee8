"""The ``fabricops sim`` commands, through the command line as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from fabricops.cli.main import app
from fabricops.core.topology import load_topology
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.runfile import RunReader

FAULT_LINK = "leaf-0:eth33~spine-0:eth1"


# Plain, wide output whatever the environment says (no forced colour, no wrapping).
PLAIN_ENV: dict[str, str | None] = {"FORCE_COLOR": None, "TTY_COMPATIBLE": None,
                                    "COLUMNS": "160"}


def run(*args: str) -> Result:
    return CliRunner(env=PLAIN_ENV).invoke(app, list(args))


def scenario_doc(**changes: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "name": "tiny",
        "seed": 1,
        "duration_s": 10,
        "tick_s": 1.0,
        "topology": {"builder": "leaf_spine", "params": {"gpus": 64}},
        "jobs": [{"name": "job-tiny", "hosts": 4, "placement": "random",
                  "compute_s": 0.5, "comm_bytes_per_nic": 1.0e10}],
        "faults": [{"type": "gray_loss", "entity": FAULT_LINK, "start_s": 2,
                    "duration_s": 3}],
    }
    doc.update(changes)
    return doc


def write_scenario(tmp_path: Path, **changes: object) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario_doc(**changes)), encoding="utf-8")
    return path


def assert_bad_input(result: Result, *needles: str) -> None:
    """Exit 2, one ``error:`` line on stderr naming the problem, no traceback."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0]
    assert "Traceback" not in result.output


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    tmp = tmp_path_factory.mktemp("run")
    out = tmp / "tiny.run.gz"
    result = run("sim", "run", str(write_scenario(tmp)), "-o", str(out))
    return out, result


# --- help ------------------------------------------------------------------------------


def test_root_help_exits_0() -> None:
    result = run("--help")
    assert result.exit_code == 0
    assert "sim" in result.stdout


def test_run_help_exits_0_and_documents_options() -> None:
    result = run("sim", "run", "--help")
    assert result.exit_code == 0
    for option in ("--preset", "--duration", "--seed", "--telemetry-every", "--json"):
        assert option in result.stdout


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout.startswith("fabricops ")


# --- topology --------------------------------------------------------------------------


def test_topology_build_writes_json_with_the_right_counts(tmp_path: Path) -> None:
    out = tmp_path / "fabric.json"
    result = run("sim", "topology", "build", "leaf_spine", "--set", "gpus=128",
                 "--set", "oversubscription=3", "-o", str(out))
    assert result.exit_code == 0, result.output
    expected = leaf_spine(gpus=128, oversubscription=3).summary()
    assert load_topology(out).summary() == expected
    assert f"{expected['ports']:,}" in result.stdout


def test_topology_build_writes_yaml_by_suffix(tmp_path: Path) -> None:
    out = tmp_path / "fabric.yaml"
    result = run("sim", "topology", "build", "fat_tree", "--set", "k=4", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert isinstance(yaml.safe_load(out.read_text()), dict)
    assert load_topology(out).kind == "fat_tree"


def test_topology_build_refuses_an_unknown_parameter(tmp_path: Path) -> None:
    result = run("sim", "topology", "build", "leaf_spine", "--set", "gpuz=8",
                 "-o", str(tmp_path / "t.json"))
    assert_bad_input(result, "gpuz")


def test_topology_show_prints_counts_and_links(tmp_path: Path) -> None:
    out = tmp_path / "fabric.json"
    assert run("sim", "topology", "build", "leaf_spine", "--set", "gpus=64",
               "-o", str(out)).exit_code == 0
    result = run("sim", "topology", "show", str(out), "--links", "2")
    assert result.exit_code == 0, result.output
    summary = load_topology(out).summary()
    for key in ("switches", "hosts", "nics", "ports", "links"):
        assert key in result.stdout
    assert str(summary["links"]) in result.stdout
    assert "host-000:nic0" in result.stdout


def test_topology_show_names_a_dangling_link(tmp_path: Path) -> None:
    topo = leaf_spine(gpus=64).model_dump(mode="json")
    topo["links"].append({"a": "host-000:nic9", "b": "ghost-7:eth1"})
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(topo), encoding="utf-8")
    result = run("sim", "topology", "show", str(path))
    assert_bad_input(result, "dangling", "ghost-7")


# --- presets ---------------------------------------------------------------------------


def test_presets_lists_demo_with_its_description() -> None:
    result = run("sim", "presets")
    assert result.exit_code == 0, result.output
    assert "demo" in result.stdout
    assert "leaf-spine" in result.stdout


# --- run -------------------------------------------------------------------------------


def test_run_writes_a_run_file_matching_the_scenario(run_file: tuple[Path, Result]) -> None:
    out, result = run_file
    assert result.exit_code == 0, result.output
    reader = RunReader(out)
    header = reader.header()
    assert header["scenario"]["name"] == "tiny"
    assert header["topology"] == leaf_spine(gpus=64).summary()
    truth = reader.truth()
    assert [(t["type"], t["entity"]) for t in truth] == [("gray_loss", FAULT_LINK)]
    assert sum(1 for _ in reader.ticks()) == 10  # duration_s / tick_s


def test_run_prints_the_summary_sections(run_file: tuple[Path, Result]) -> None:
    _, result = run_file
    text = result.stdout
    assert "Fabric link utilization" in text
    assert "p99" in text
    assert "paused ports" in text
    assert "Job job-tiny throughput" in text
    assert "Gb/s per NIC" in text
    assert "Injected faults" in text
    assert FAULT_LINK in text
    assert "Run file:" in text


def test_run_json_is_the_summary_and_nothing_else(tmp_path: Path) -> None:
    result = run("sim", "run", str(write_scenario(tmp_path)), "--json", "--duration", "4")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ticks"] == 4
    assert doc["scenario"] == "tiny"
    assert set(doc["jobs"]) == {"job-tiny"}


def test_run_seed_override_is_used(tmp_path: Path) -> None:
    result = run("sim", "run", str(write_scenario(tmp_path)), "--json", "--seed", "9",
                 "--duration", "2", "-o", str(tmp_path / "r.run"))
    assert result.exit_code == 0, result.output
    assert RunReader(tmp_path / "r.run").header()["scenario"]["seed"] == 9


def test_run_refuses_a_fault_on_a_missing_entity(tmp_path: Path) -> None:
    fault = {"type": "link_down", "entity": "leaf-9:eth1~spine-9:eth1", "start_s": 1}
    path = write_scenario(tmp_path, faults=[fault])
    result = run("sim", "run", str(path), "-o", str(tmp_path / "r.run"))
    assert_bad_input(result, "leaf-9:eth1~spine-9:eth1", "does not exist")
    assert not (tmp_path / "r.run").exists()


def test_run_refuses_a_negative_duration(tmp_path: Path) -> None:
    result = run("sim", "run", str(write_scenario(tmp_path, duration_s=-5)))
    assert_bad_input(result, "duration_s")


def test_run_refuses_an_unknown_preset_and_lists_the_known_ones() -> None:
    result = run("sim", "run", "--preset", "no-such-preset")
    assert_bad_input(result, "no-such-preset", "demo", "pfc-storm")


def test_run_refuses_both_a_scenario_and_a_preset(tmp_path: Path) -> None:
    result = run("sim", "run", str(write_scenario(tmp_path)), "--preset", "demo")
    assert_bad_input(result, "not both")


def test_run_refuses_a_missing_scenario_file(tmp_path: Path) -> None:
    result = run("sim", "run", str(tmp_path / "nope.yaml"))
    assert_bad_input(result, "nope.yaml")


# --- inspect ---------------------------------------------------------------------------


def test_inspect_prints_header_counts_and_truth(run_file: tuple[Path, Result]) -> None:
    out, _ = run_file
    result = run("sim", "inspect", str(out))
    assert result.exit_code == 0, result.output
    assert "tiny" in result.stdout
    assert "10 ticks" in result.stdout
    assert FAULT_LINK in result.stdout


def test_inspect_device_json_is_the_frame(run_file: tuple[Path, Result]) -> None:
    out, _ = run_file
    result = run("sim", "inspect", str(out), "--device", "leaf-0", "--json")
    assert result.exit_code == 0, result.output
    frame = json.loads(result.stdout)
    assert frame["device"] == "leaf-0"
    assert "in_octets" in {s["metric"] for s in frame["samples"]}


def test_inspect_device_table_at_a_tick(run_file: tuple[Path, Result]) -> None:
    out, _ = run_file
    result = run("sim", "inspect", str(out), "--device", "leaf-0", "--tick", "0")
    assert result.exit_code == 0, result.output
    assert "leaf-0 at tick 0" in result.stdout
    assert "in_octets" in result.stdout


def test_inspect_names_an_unknown_device(run_file: tuple[Path, Result]) -> None:
    out, _ = run_file
    result = run("sim", "inspect", str(out), "--device", "leaf-99")
    assert_bad_input(result, "leaf-99")


def test_inspect_refuses_a_file_that_is_not_a_run_file(tmp_path: Path) -> None:
    path = write_scenario(tmp_path)
    result = run("sim", "inspect", str(path))
    assert_bad_input(result, "not a fabricops run file")
