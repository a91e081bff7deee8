"""A command that starts servers and is given a bad flag or file says so on one line,
names the flag or file, starts nothing it leaves behind, and exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricops.cli.common import EXIT_BAD_INPUT
from fabricops.cli.main import app

from .startup_cases import CASES, Case, prepare, run_case, run_fabricops


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("startup")
    prepare(path)
    return path


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_flag_or_file_is_one_line_naming_it_and_exit_2(case: Case, folder: Path) -> None:
    outcome, names = run_case(case, folder)
    assert outcome.code == EXIT_BAD_INPUT, outcome.stderr
    (line,) = outcome.stderr_lines
    assert line.startswith("error: "), line
    for word in names:
        assert word in line, (word, line)
    assert "Traceback" not in outcome.stderr


def test_debug_shows_the_traceback_of_a_bad_flag(folder: Path) -> None:
    outcome = run_fabricops(["--debug", "up", "--db", "nonsense", "--api-port", "0"], folder)
    assert outcome.code != 0
    assert "StartupError" in outcome.stderr
    assert len(outcome.stderr_lines) > 1


@pytest.mark.parametrize("command", [["up"], ["collect"], ["serve", "rca"], ["serve", "api"],
                                     ["serve", "sim"]], ids=" ".join)
def test_help_of_every_long_running_command_documents_the_exit_codes(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "Exit codes: 0 stopped as asked" in text
    assert "3 a worker died" in text
