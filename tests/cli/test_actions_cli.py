"""``fabricops actions``: an operator reads actions and decides on them; refusals are named."""

from __future__ import annotations

import json
import os
import pwd
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabricops.cli.main import app
from fabricops.core.actions import Action, ActionState, Step, StepOp
from fabricops.store.store import Store, StoreConfig
from tests.store.samples import T0, S
from tests.store.test_actions import in_state

ENV = {"COLUMNS": "200", "FORCE_COLOR": "", "USER": "dana"}
UNDO = (Step(op=StepOp.SET_WEIGHT, target="leaf-0:eth1", params={"weight": 1}),
        Step(op=StepOp.SET_WEIGHT, target="spine-1:eth3", params={"weight": 1}))


def seeded() -> list[Action]:
    """One action in each state an operator meets, newest change first."""
    return [in_state(ActionState.PROPOSED, "act-p", t_s=50),
            in_state(ActionState.APPROVED, "act-a", t_s=40),
            in_state(ActionState.VERIFIED, "act-v", t_s=30).model_copy(update={"undo": UNDO}),
            in_state(ActionState.APPLIED, "act-x", t_s=20).model_copy(update={"undo": UNDO}),
            in_state(ActionState.REJECTED, "act-r", t_s=10)]


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'fabricops.db'}"
    with _store(url) as store:
        for action in seeded():
            store.put_action(action)
    return url


@contextmanager
def _store(url: str) -> Iterator[Store]:
    """A started store on ``url``, stopped on exit."""
    store = Store(StoreConfig(url=url))
    store.start()
    try:
        yield store
    finally:
        store.stop()


def run(db: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Exit code, stdout and stderr (whitespace collapsed) of ``fabricops actions ARGS``."""
    result = CliRunner().invoke(app, ["actions", *args, "--db", db], env=env or ENV)
    return result.exit_code, result.stdout, " ".join(result.stderr.split())


def stored(db: str, action_id: str) -> Action:
    with _store(db) as store:
        action = store.action(action_id)
    assert action is not None
    return action


def test_list_shows_actions_newest_change_first(db: str) -> None:
    code, out, _ = run(db, "list")
    assert code == 0
    rows = [line for line in out.splitlines() if "act-" in line]
    assert [row.split()[0] for row in rows] == ["act-p", "act-a", "act-v", "act-x", "act-r"]
    assert re.split(r"\s{2,}", rows[0].strip()) == [
        "act-p", "proposed", "drain_link", "leaf-0:eth1--spine-1:eth3", "gray_loss", "93%",
        "2026-01-01 00:00:50", "approve", "inc-a"]


def test_list_as_json_filtered_and_limited(db: str) -> None:
    code, out, _ = run(db, "list", "--json")
    assert code == 0
    assert [Action.model_validate(a) for a in json.loads(out)] == seeded()
    code, out, _ = run(db, "list", "--state", "applied", "--json")
    assert [a["id"] for a in json.loads(out)] == ["act-x"]
    code, out, _ = run(db, "list", "--limit", "2", "--json")
    assert [a["id"] for a in json.loads(out)] == ["act-p", "act-a"]
    code, out, _ = run(db, "list", "--state", "failed")
    assert (code, out.strip()) == (0, f"no actions in state failed in {db}")


def test_show_tells_what_why_whom_undo_and_history(db: str) -> None:
    code, out, _ = run(db, "show", "act-x")
    assert code == 0
    for expected in ("action act-x", "applied", "gray_loss, confidence 93%",
                     "FCS errors on one direction", "host-3, host-7", "job-42", "steps: 2",
                     "undo steps (filled as steps are applied): 2", "weight=1",
                     "2026-01-01 00:00:22"):
        assert expected in out, expected
    audit = [re.split(r"\s{2,}", line.strip()) for line in out.splitlines()
             if re.match(r"\s*\d+\s+2026-", line)]
    assert audit == [["0", "2026-01-01 00:00:20", "policy", "proposed", "mode approve"],
                     ["1", "2026-01-01 00:00:21", "test", "approved"],
                     ["2", "2026-01-01 00:00:22", "test", "applied"]]
    code, out, _ = run(db, "show", "act-x", "--json")
    assert Action.model_validate_json(out) == seeded()[3]


def test_approve_moves_a_proposed_action_and_says_what_follows(db: str) -> None:
    code, out, _ = run(db, "approve", "act-p", "--by", "ana", "--note", "change CHG-1234")
    assert code == 0
    assert "approved by operator:ana" in out
    assert "applies it at its next poll (2 steps)" in out
    assert "set_weight spine-1:eth3 (weight=0)" in out
    action = stored(db, "act-p")
    assert action.state is ActionState.APPROVED
    entry = action.audit[-1]
    assert (entry.actor, entry.state, entry.note) == ("operator:ana", ActionState.APPROVED,
                                                      "change CHG-1234")
    assert entry.ts_ns > T0 + 50 * S


@pytest.mark.parametrize(("env", "actor"), [
    (ENV, "operator:dana"),
    ({**ENV, "USER": "", "LOGNAME": ""}, f"operator:{pwd.getpwuid(os.getuid()).pw_name}")])
def test_the_operator_is_user_by_default(db: str, env: dict[str, str], actor: str) -> None:
    code, out, _ = run(db, "reject", "act-p", env=env)
    assert code == 0
    assert f"rejected by {actor}: nothing will be applied" in out
    assert stored(db, "act-p").audit[-1].actor == actor


@pytest.mark.parametrize("action_id", ["act-p", "act-a"])
def test_reject_a_proposed_or_approved_action(db: str, action_id: str) -> None:
    code, _, _ = run(db, "reject", action_id, "--note", "job checkpoints at 14:00")
    assert code == 0
    action = stored(db, action_id)
    assert (action.state, action.audit[-1].note) == (ActionState.REJECTED,
                                                     "job checkpoints at 14:00")


@pytest.mark.parametrize(("action_id", "state"), [("act-x", ActionState.APPLIED),
                                                  ("act-v", ActionState.VERIFIED)])
def test_rollback_keeps_the_state_and_asks_the_service(db: str, action_id: str,
                                                       state: ActionState) -> None:
    code, out, _ = run(db, "rollback", action_id, "--by", "ana", "--note", "optic replaced")
    assert code == 0
    assert "the remediation service undoes 2 steps at its next poll" in out
    assert "set_weight leaf-0:eth1 (weight=1)" in out
    action = stored(db, action_id)
    assert (action.state, action.request) == (state, "rollback")
    assert action.audit[-1].note == "rollback requested: optic replaced"
    with _store(db) as store:
        assert action in store.pending_actions()
    code, out, _ = run(db, "list")
    assert f"{state.value} (rollback requested)" in out


@pytest.mark.parametrize(("args", "message"), [
    (("approve", "act-a"), "action act-a is approved: approve needs an action that is proposed"),
    (("approve", "act-x"), "action act-x is applied: approve needs an action that is proposed"),
    (("reject", "act-x"), "action act-x is applied: reject needs an action that is approved or "
                          "proposed"),
    (("reject", "act-r"), "action act-r is rejected: reject needs"),
    (("rollback", "act-p"), "action act-p is proposed: rollback needs an action that is "
                            "applied or verified"),
    (("rollback", "act-r"), "action act-r is rejected: rollback needs"),
])
def test_a_move_the_state_does_not_allow_exits_1(db: str, args: tuple[str, ...],
                                                 message: str) -> None:
    before = stored(db, args[1])
    code, _, err = run(db, *args)
    assert code == 1
    assert f"error: {message}" in err
    assert stored(db, args[1]) == before


def test_a_second_rollback_request_exits_1(db: str) -> None:
    assert run(db, "rollback", "act-x")[0] == 0
    before = stored(db, "act-x")
    code, _, err = run(db, "rollback", "act-x")
    assert code == 1
    assert "action act-x is applied and a rollback is already requested" in err
    assert stored(db, "act-x") == before


def test_a_decision_on_a_version_moved_meanwhile_exits_1(
        db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    read = Store.action

    def read_then_lose_the_race(store: Store, action_id: str) -> Action | None:
        seen = read(store, action_id)
        with _store(db) as other:
            other.transition_action(action_id, to=ActionState.REJECTED, actor="safety",
                                    ts_ns=T0 + 99 * S)
        return seen

    monkeypatch.setattr(Store, "action", read_then_lose_the_race)
    code, _, err = run(db, "approve", "act-p")
    assert code == 1
    assert "action act-p is rejected with 2 audit entries; this update to approved" in err
    monkeypatch.undo()
    assert stored(db, "act-p").state is ActionState.REJECTED


@pytest.mark.parametrize("command", ["show", "approve", "reject", "rollback"])
def test_an_unknown_id_exits_2_naming_it(db: str, command: str) -> None:
    code, _, err = run(db, command, "act-nope")
    assert code == 2
    assert "error: no action has id 'act-nope'" in err


def test_a_store_that_was_never_created_is_named(tmp_path: Path) -> None:
    code, _, err = run(f"sqlite:///{tmp_path / 'none.db'}", "list")
    assert code == 2
    assert "none.db" in err
