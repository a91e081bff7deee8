"""Remediation actions in the store, on SQLite and on a real PostgreSQL (``db_url`` / ``store``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial

import pytest
from sqlalchemy import Engine, inspect, text

from fabricops.core.actions import (
    TRANSITIONS,
    Action,
    ActionKind,
    ActionMode,
    ActionState,
    Step,
    StepOp,
)
from fabricops.store import Store, StoreConfig, StoreError
from fabricops.store.database import build_engine, parse_url
from fabricops.store.schema import downgrade, upgrade
from fabricops.store.store import ActionConflict, ActionNotFound
from tests.store.samples import T0, S
from tests.store.test_diagnoses import revisions

LINK = "leaf-0:eth1--spine-1:eth3"
PATH_TO: dict[ActionState, tuple[ActionState, ...]] = {
    ActionState.PROPOSED: (),
    ActionState.APPROVED: (ActionState.APPROVED,),
    ActionState.APPLIED: (ActionState.APPROVED, ActionState.APPLIED),
    ActionState.VERIFIED: (ActionState.APPROVED, ActionState.APPLIED, ActionState.VERIFIED),
    ActionState.ROLLED_BACK: (ActionState.APPROVED, ActionState.APPLIED,
                              ActionState.ROLLED_BACK),
    ActionState.FAILED: (ActionState.APPROVED, ActionState.FAILED),
    ActionState.REJECTED: (ActionState.REJECTED,),
}
"""The moves that bring a proposed action to each state."""


def proposed(action_id: str = "act-a", *, incident: str = "inc-a", t_s: int = 0,
             target: str = LINK) -> Action:
    """An action proposed at T0 + ``t_s`` seconds, with steps, undo and one audit entry."""
    created = T0 + t_s * S
    return Action(
        id=action_id, diagnosis_id=incident, created_ns=created, ts_ns=created,
        kind=ActionKind.DRAIN_LINK, target=target, fault_type="gray_loss", confidence=0.93,
        mode=ActionMode.APPROVE,
        steps=(Step(op=StepOp.SET_WEIGHT, target="leaf-0:eth1", params={"weight": 0}),
               Step(op=StepOp.SET_WEIGHT, target="spine-1:eth3", params={"weight": 0})),
        affected_hosts=("host-3", "host-7"), affected_jobs=("job-42",),
        reason="FCS errors on one direction of the link; draining keeps it up for tests",
    ).moved(ActionState.PROPOSED, ts_ns=created, actor="policy", note="mode approve")


def in_state(state: ActionState, action_id: str, *, t_s: int = 0, **kwargs: str) -> Action:
    """A proposed action moved to ``state``, one second per move."""
    action = proposed(action_id, t_s=t_s, **kwargs)
    for i, step in enumerate(PATH_TO[state], start=1):
        action = action.moved(step, ts_ns=action.created_ns + i * S, actor="test")
    return action


def test_an_action_reads_back_whole(store: Store) -> None:
    original = in_state(ActionState.APPLIED, "act-a").model_copy(update={
        "undo": (Step(op=StepOp.SET_WEIGHT, target="leaf-0:eth1", params={"weight": 1}),),
        "request": "rollback"})
    assert store.put_action(original) == original
    assert store.action("act-a") == original
    bare = Action(id="act-ü", diagnosis_id="inc-b", created_ns=0, ts_ns=0,
                  kind=ActionKind.TICKET, target="host-1", fault_type="", confidence=0.0,
                  mode=ActionMode.OBSERVE)
    assert store.put_action(bare) == bare
    assert store.action("act-ü") == bare
    assert store.action("act-A") is None


def test_a_repeated_proposal_returns_the_stored_action(store: Store) -> None:
    first = proposed()
    store.put_action(first)
    revised = proposed(t_s=30).model_copy(update={"confidence": 0.5})
    assert store.put_action(revised) == first
    assert store.action(first.id) == first
    assert _log_rows(store) == [("act-a", 0, T0, "policy", "proposed", "mode approve")]
    value = store.registry.get_sample_value
    assert value("fabricops_store_rows_written_total", {"table": "actions"}) == 1
    assert value("fabricops_store_duplicates_ignored_total", {"table": "actions"}) == 1


def test_an_update_from_the_stored_version_is_written_with_its_log(store: Store) -> None:
    stored = store.put_action(proposed())
    approved = stored.moved(ActionState.APPROVED, ts_ns=T0 + S, actor="operator:ana")
    applied = approved.moved(ActionState.APPLIED, ts_ns=T0 + 2 * S, actor="actuator:sim",
                             note="2 steps").model_copy(update={"undo": stored.steps})
    assert store.put_action(approved, prior=stored) == approved
    assert store.put_action(applied, prior=approved) == applied
    assert store.action(stored.id) == applied
    assert _log_rows(store) == _audit_rows(applied)


def test_an_update_from_a_stale_version_is_refused_and_changes_nothing(store: Store) -> None:
    stored = store.put_action(proposed())
    approved = store.put_action(
        stored.moved(ActionState.APPROVED, ts_ns=T0 + S, actor="operator:ana"), prior=stored)
    stale = stored.moved(ActionState.REJECTED, ts_ns=T0 + 2 * S, actor="safety")
    with pytest.raises(ActionConflict, match=r"action act-a is approved with 2 audit entries; "
                                             r"this update to rejected was made from a "
                                             r"version with 1"):
        store.put_action(stale, prior=stored)
    assert store.action(stored.id) == approved
    assert _log_rows(store) == _audit_rows(approved)
    assert store.registry.get_sample_value("fabricops_store_errors_total",
                                           {"op": "put_action_conflict"}) == 1


def test_an_update_of_a_missing_action_or_of_another_history_is_refused(store: Store) -> None:
    stored = proposed()
    approved = stored.moved(ActionState.APPROVED, ts_ns=T0 + S, actor="operator:ana")
    with pytest.raises(ActionNotFound, match=r"no action has id 'act-a'"):
        store.put_action(approved, prior=stored)
    store.put_action(stored)
    rewritten = approved.model_copy(update={"audit": approved.audit[1:]})
    with pytest.raises(ActionConflict, match=r"action act-a is proposed: this update to "
                                             r"approved does not extend its stored audit "
                                             r"trail of 1 entries"):
        store.put_action(rewritten, prior=rewritten)
    assert store.action(stored.id) == stored


def test_transitions_follow_the_rules(store: Store) -> None:
    for i, (start, to) in enumerate((a, b) for a in ActionState for b in ActionState):
        action = store.put_action(in_state(start, f"act-{i}"))
        allowed = to is start or to in TRANSITIONS[start]
        if not allowed:
            with pytest.raises(ActionConflict, match=rf"action act-{i} is {start.value}: it "
                                                     rf"cannot move to {to.value}"):
                store.transition_action(action.id, to=to, actor="operator:ana",
                                        ts_ns=T0 + 10 * S)
            assert store.action(action.id) == action
            continue
        moved = store.transition_action(action.id, to=to, actor="operator:ana", note="why",
                                        ts_ns=T0 + 10 * S)
        assert moved == action.moved(to, ts_ns=T0 + 10 * S, actor="operator:ana", note="why")
        assert store.action(action.id) == moved
    assert _log_rows(store) == sorted(row for a in store.actions(limit=100)
                                      for row in _audit_rows(a))


def test_a_transition_can_keep_the_state_and_set_a_request(store: Store) -> None:
    action = store.put_action(in_state(ActionState.VERIFIED, "act-a"))
    asked = store.transition_action(action.id, to=None, actor="operator:ana",
                                    note="rollback requested: maintenance", ts_ns=T0 + 9 * S,
                                    request="rollback")
    assert (asked.state, asked.request, asked.ts_ns) == (ActionState.VERIFIED, "rollback",
                                                         T0 + 9 * S)
    assert asked.audit[-1].note == "rollback requested: maintenance"
    cleared = store.transition_action(action.id, to=ActionState.ROLLED_BACK, actor="service",
                                      ts_ns=T0 + 10 * S, request="")
    assert (cleared.state, cleared.request) == (ActionState.ROLLED_BACK, "")
    assert store.pending_actions() == []


def test_moving_an_unknown_action_names_it(store: Store) -> None:
    with pytest.raises(ActionNotFound, match=r"transition_action on database .*: no action has "
                                             r"id 'act-x'") as caught:
        store.transition_action("act-x", to=ActionState.APPROVED, actor="operator:ana",
                                ts_ns=T0)
    assert isinstance(caught.value, LookupError)


def test_pending_actions_are_approved_or_requested_oldest_first(store: Store) -> None:
    stored = [store.put_action(in_state(state, f"act-{state.value}", t_s=t_s))
              for t_s, state in enumerate(ActionState)]
    rollback = store.transition_action("act-verified", to=None, actor="operator:ana",
                                       ts_ns=T0, request="rollback")
    approved = next(a for a in stored if a.state is ActionState.APPROVED)
    assert store.pending_actions() == [rollback, approved]


def test_actions_are_filtered_and_newest_first(store: Store) -> None:
    made = [in_state(ActionState.PROPOSED, "b", t_s=5),
            in_state(ActionState.PROPOSED, "B", t_s=5),
            in_state(ActionState.APPROVED, "a", t_s=3, incident="inc-b"),
            in_state(ActionState.REJECTED, "ü", t_s=1, incident="inc-b"),
            in_state(ActionState.PROPOSED, "c", t_s=0)]
    for action in made:
        store.put_action(action)
    b_upper, b_lower, a, u, c = made[1], made[0], made[2], made[3], made[4]
    assert store.actions() == [b_upper, b_lower, a, u, c]
    assert store.actions(limit=2) == [b_upper, b_lower]
    assert store.actions(state=ActionState.PROPOSED) == [b_upper, b_lower, c]
    assert store.actions(diagnosis_id="inc-b") == [a, u]
    assert store.actions(state=ActionState.REJECTED, diagnosis_id="inc-b") == [u]
    assert store.actions(state=ActionState.FAILED) == []


def test_prune_keeps_actions(db_url: str) -> None:
    store = Store(StoreConfig(url=db_url, retention_s=1))
    store.start()
    try:
        action = store.put_action(in_state(ActionState.VERIFIED, "act-a"))
        store.put_diagnoses(revisions())
        assert store.prune(now_ns=T0 + 10**6 * S) == len(revisions())
        assert store.actions() == [action]
        assert _log_rows(store) == _audit_rows(action)
    finally:
        store.stop()


def test_a_body_that_no_longer_decodes_is_skipped_and_counted(store: Store) -> None:
    good, bad = proposed("act-a"), proposed("act-b", t_s=1)
    store.put_action(good)
    store.put_action(bad)
    with _engine(store) as engine, engine.begin() as conn:
        conn.execute(text("UPDATE actions SET body = :body WHERE id = 'act-b'"),
                     {"body": bad.model_dump_json().encode().replace(b'"drain_link"',
                                                                     b'"reboot_switch"')})
    assert store.actions() == [good]
    assert store.action("act-b") is None
    value = store.registry.get_sample_value
    assert value("fabricops_store_errors_total", {"op": "actions_decode"}) == 1
    with pytest.raises(StoreError, match=r"the stored action act-b no longer decodes: "
                                         r"kind: Input should be") as caught:
        store.transition_action("act-b", to=ActionState.APPROVED, actor="operator:ana", ts_ns=T0)
    assert not isinstance(caught.value, ActionConflict)
    assert value("fabricops_store_errors_total", {"op": "transition_action_decode"}) == 1


def test_writers_racing_on_one_action_lose_cleanly(store: Store) -> None:
    """Of writers from the same prior one wins; moves made under the lock all land."""
    stored = store.put_action(proposed())
    racers = [stored.moved(ActionState.APPROVED, ts_ns=T0 + S, actor=f"operator:{i}")
              for i in range(6)]
    won, lost = _race([partial(store.put_action, a, prior=stored) for a in racers])
    assert (len(won), lost) == (1, 5)
    assert store.action(stored.id) == won[0]

    won, lost = _race([partial(store.transition_action, stored.id, to=None,
                               actor=f"operator:{i}", ts_ns=T0 + 2 * S) for i in range(6)])
    assert lost == 0, "each move reads the latest version under the lock"
    final = store.action(stored.id)
    assert final is not None
    assert sorted(e.actor for e in final.audit[2:]) == [f"operator:{i}" for i in range(6)]
    assert _log_rows(store) == _audit_rows(final)


def test_a_0003_database_with_rows_upgrades_and_downgrades(db_url: str) -> None:
    engine = build_engine(parse_url(db_url), timeout_s=5)
    try:
        upgrade(engine, "0003")
        store = Store(StoreConfig(url=db_url))
        store.start()
        try:
            store.put_diagnoses(revisions())
            action = store.put_action(proposed())
            assert store.actions() == [action]
        finally:
            store.stop()
        downgrade(engine, "0003")
        assert {"actions", "action_log"}.isdisjoint(inspect(engine).get_table_names())
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM diagnoses")).scalar_one() == 12
    finally:
        engine.dispose()


def _race(writes: Sequence[Callable[[], Action]]) -> tuple[list[Action], int]:
    """Run ``writes`` at once; the actions written, and how many were ActionConflicts."""
    gate = threading.Barrier(len(writes))
    won: list[Action] = []
    lost: list[ActionConflict] = []

    def run(write: Callable[[], Action]) -> None:
        gate.wait()
        try:
            won.append(write())
        except ActionConflict as exc:
            lost.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in writes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won, len(lost)


@contextmanager
def _engine(store: Store) -> Iterator[Engine]:
    """A second engine on the store's database, to read and write behind its back."""
    engine = build_engine(parse_url(store.config.url), timeout_s=5)
    try:
        yield engine
    finally:
        engine.dispose()


def _log_rows(store: Store) -> list[tuple[str, int, int, str, str, str]]:
    with _engine(store) as engine, engine.connect() as conn:
        rows = conn.execute(text("SELECT action_id, seq, ts_ns, actor, state, note "
                                 "FROM action_log")).all()
    return sorted((r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows)


def _audit_rows(action: Action) -> list[tuple[str, int, int, str, str, str]]:
    return [(action.id, seq, e.ts_ns, e.actor, e.state.value, e.note)
            for seq, e in enumerate(action.audit)]

