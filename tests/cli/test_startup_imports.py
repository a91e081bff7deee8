"""``fabricops --help`` loads no command's module: it answers before any heavy library
is imported. Each command still loads, under its own name."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fabricops.cli.main import COMMANDS, app, load_command

HEAVY = ("numpy", "sqlalchemy", "sklearn", "scipy", "grpc", "kafka", "pysnmp", "fastapi",
         "alembic", "fabricops.simulator", "fabricops.store")

PROBE = """
import contextlib, io, json, sys
from fabricops.cli.main import app
with contextlib.redirect_stdout(io.StringIO()):
    try:
        app(sys.argv[1:], standalone_mode=False)
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in sys.modules)))
"""


def loaded_by(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                          text=True, timeout=120, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_the_roots_help_imports_no_heavy_library(args: tuple[str, ...]) -> None:
    modules = loaded_by(*args)
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
    assert heavy == [], heavy


def test_the_roots_help_lists_every_command_in_one_line_each() -> None:
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"}).stdout
    for name, (_, _, line, _) in COMMANDS.items():
        assert f"{name} " in out, name
        assert len(line) <= 80 - 4 - 12, f"{name}: its line wraps at 80 columns"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_loads_under_its_name_with_its_help(name: str) -> None:
    command = load_command(name)
    assert command.name == name
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert f"fabricops {name}" in result.stdout
