"""Fixture trees of the host agent: hand-written from the drivers' documentation."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from fabricops.core.frame import Frame

FIXTURES = Path(__file__).parent / "fixtures"


class ListSink:
    """A frame sink that keeps what it is given."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []

    def publish_frames(self, frames: Sequence[Frame]) -> None:
        self.frames.extend(frames)


@pytest.fixture
def tree(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A writable copy of the fixture tree named by the test's parameter (default mlx5)."""
    name = getattr(request, "param", "mlx5")
    out = tmp_path / name
    shutil.copytree(FIXTURES / name, out)
    return out
