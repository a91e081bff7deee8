"""Reading an operator's YAML file, with errors that name the file and the place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def read_text(path: Path, what: str, error: type[ValueError]) -> str:
    """The UTF-8 text of ``path``; ``error`` names the file, what it is, and the cause."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not valid UTF-8 text (byte {exc.start}): {exc.reason}") from None


def read_yaml(path: Path, what: str, error: type[ValueError]) -> Any:
    """The parsed YAML document of ``path``; errors as ``read_text``, plus line and column."""
    text = read_text(path, what, error)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML{_where(exc)}") from None


def _where(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f" at line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    return f": {exc}"
