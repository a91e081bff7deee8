"""Suite-wide test policy.

A test that needs a real server starts it itself. Where the server's program
is missing it is skipped with the reason, except when
``FABRICOPS_REQUIRE_PEERS=1`` (as in CI), where a missing peer fails the test.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def peers_required() -> bool:
    return os.environ.get("FABRICOPS_REQUIRE_PEERS", "") == "1"


def missing_peer(message: str) -> NoReturn:
    """Skip the test with ``message``, or fail it under FABRICOPS_REQUIRE_PEERS=1."""
    if peers_required():
        pytest.fail(message + " (FABRICOPS_REQUIRE_PEERS=1)")
    pytest.skip(message)


def require_program(name: str, why: str) -> str:
    """Path of program ``name``; skip (or fail under FABRICOPS_REQUIRE_PEERS=1) if absent."""
    path = shutil.which(name)
    if path is None:
        missing_peer(f"{name} is not installed; it is needed {why}")
    return path
