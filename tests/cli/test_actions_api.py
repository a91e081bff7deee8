"""``fabricops actions --api``: every operator reads and decides through one running API."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from fabricops.api.context import ApiConfig, ApiContext
from fabricops.api.server import ApiServer
from fabricops.cli.main import app
from fabricops.core.actions import Action, ActionState
from fabricops.store.store import Store, StoreConfig
from tests.cli.test_actions_cli import seeded

ENV = {"COLUMNS": "200", "FORCE_COLOR": "", "USER": "dana"}
TOKEN = "s3cret-token"


@pytest.fixture
def api(tmp_path: object) -> Iterator[tuple[str, Store]]:
    """A running API over a store seeded with one action in each state."""
    store = Store(StoreConfig(url=f"sqlite:///{tmp_path}/api.db"))  # type: ignore[str-bytes-safe]
    store.start()
    for action in seeded():
        store.put_action(action)
    server = ApiServer(ApiContext(config=ApiConfig(port=0, token=SecretStr(TOKEN)),
                                  store=store))
    server.start()
    try:
        yield server.url, store
    finally:
        server.stop()
        store.stop()


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["actions", *args], env=ENV)
    return result.exit_code, result.stdout, " ".join(result.stderr.split())


def test_list_and_show_read_the_apis_store(api: tuple[str, Store]) -> None:
    url, _ = api
    code, out, err = run("list", "--api", url, "--json")
    assert code == 0, err
    assert [Action.model_validate(a) for a in json.loads(out)] == seeded()
    code, out, err = run("list", "--api", url, "--state", "proposed", "--json")
    assert [a["id"] for a in json.loads(out)] == ["act-p"]
    code, out, err = run("show", "act-v", "--api", url)
    assert code == 0, err
    assert "action act-v" in out
    assert "verified" in out


def test_a_decision_through_the_api_lands_in_its_store(api: tuple[str, Store]) -> None:
    url, store = api
    code, out, err = run("approve", "act-p", "--api", url, "--token", TOKEN,
                         "--note", "change CHG-1")
    assert code == 0, err
    assert "approved by operator:dana" in out
    kept = store.action("act-p")
    assert kept is not None
    assert kept.state is ActionState.APPROVED
    assert (kept.audit[-1].actor, kept.audit[-1].note) == ("operator:dana", "change CHG-1")


def test_refusals_and_unknown_ids_through_the_api_are_one_line(
        api: tuple[str, Store]) -> None:
    url, store = api
    code, _, err = run("approve", "act-r", "--api", url, "--token", TOKEN)
    assert (code, err) == (1, "error: action act-r is rejected: approve needs an action "
                                "that is proposed")
    assert store.action("act-r").state is ActionState.REJECTED  # type: ignore[union-attr]
    code, _, err = run("show", "act-nope", "--api", url)
    assert code == 2
    assert "no action has id 'act-nope'" in err
    code, _, err = run("approve", "act-p", "--api", url, "--token", "wrong")
    assert code == 2
    assert "--token" in err
    assert store.action("act-p").state is ActionState.PROPOSED  # type: ignore[union-attr]


def test_an_unreachable_api_or_two_sources_are_bad_input() -> None:
    code, _, err = run("list", "--api", "http://127.0.0.1:9")
    assert code == 2
    assert "cannot reach the fabricops API at http://127.0.0.1:9" in err
    code, _, err = run("list", "--api", "http://127.0.0.1:9", "--db", "sqlite:///x.db")
    assert code == 2
    assert "either --api or --db" in err
