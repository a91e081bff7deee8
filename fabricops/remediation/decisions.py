"""An operator's say on an action: approve, reject, or ask for a rollback.

One function serves every surface (the CLI, the REST API). A decision is one
compare-and-set write (``Store.put_action`` with the version read): if the
remediation service moved the action in the meantime, nothing is written and
``ActionConflict`` says what the action is now.
"""

from __future__ import annotations

import time
from enum import StrEnum

from fabricops.core.actions import TRANSITIONS, Action, ActionState
from fabricops.store.store import Store

ROLLBACK = "rollback"


class Verb(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    ROLLBACK = "rollback"


class DecisionError(ValueError):
    """A decision the action's state does not allow; the message says why."""


class UnknownActionError(LookupError):
    """No action has the id given."""


def reachable_from(state: ActionState) -> frozenset[ActionState]:
    """The states from which an action may move to ``state``."""
    return frozenset(s for s, moves in TRANSITIONS.items() if state in moves)


_TARGET: dict[Verb, ActionState | None] = {
    Verb.APPROVE: ActionState.APPROVED,
    Verb.REJECT: ActionState.REJECTED,
    Verb.ROLLBACK: None,
}
_NEEDS: dict[Verb, frozenset[ActionState]] = {
    Verb.APPROVE: reachable_from(ActionState.APPROVED),
    Verb.REJECT: reachable_from(ActionState.REJECTED),
    Verb.ROLLBACK: reachable_from(ActionState.ROLLED_BACK),
}


def decide(store: Store, action_id: str, verb: Verb, *, actor: str, note: str = "",
           now_ns: int | None = None) -> Action:
    """Record ``verb`` on the action by ``actor``; return the action as stored.

    Approve and reject move the state; rollback keeps it and sets a rollback
    request that the remediation service carries out. Raises UnknownActionError,
    DecisionError, or the store's ActionConflict on a concurrent change.
    """
    current = store.action(action_id)
    if current is None:
        raise UnknownActionError(f"no action has id {action_id!r}")
    needs = _NEEDS[verb]
    if current.state not in needs:
        can = " or ".join(sorted(s.value for s in needs))
        raise DecisionError(f"action {action_id} is {current.state.value}: {verb.value} "
                              f"needs an action that is {can}")
    changes: dict[str, str] = {}
    if verb is Verb.ROLLBACK:
        if current.request == ROLLBACK:
            raise DecisionError(f"action {action_id} is {current.state.value} and a rollback "
                                  f"is already requested; the remediation service acts on it "
                                  f"at its next poll")
        changes["request"] = ROLLBACK
        note = f"rollback requested: {note}" if note else "rollback requested"
    to = _TARGET[verb]
    moved = current.moved(current.state if to is None else to,
                          ts_ns=time.time_ns() if now_ns is None else now_ns,
                          actor=actor, note=note, **changes)
    return store.put_action(moved, prior=current)
