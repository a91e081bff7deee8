"""A fake Grafana for the push tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.dashboards.fake_grafana import FakeGrafana


@pytest.fixture
def grafana() -> Iterator[FakeGrafana]:
    """A started fake Grafana on a free loopback port, stopped after the test."""
    fake = FakeGrafana()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()
