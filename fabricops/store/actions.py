"""Remediation actions in the store: compare-and-set writes, run inside a Store transaction.

An action is one ``actions`` row (the whole record in ``body``, a few fields
copied out to filter on) and one ``action_log`` row per audit entry (``seq``
is its index in ``Action.audit``), so the history can be read with plain SQL.
Nothing here deletes a row: together they are the audit log.

A read-modify-write locks the row before it reads: ``SELECT ... FOR UPDATE``
on PostgreSQL; on SQLite a no-op UPDATE, which takes the database's write
lock (a plain SELECT would not, and two writers could read the same
version). So ``move`` applies each move to the latest version, and ``put``
with a ``prior`` compares against it: the stored audit trail must still have
``len(prior.audit)`` entries (compare-and-set). The UPDATE that writes also
matches only the body that was read. Functions return an ``Outcome``; the
Store turns a refusal into ActionConflict or ActionNotFound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError
from sqlalchemy import Connection, Row, select, update

from fabricops.core.actions import TRANSITIONS, Action, ActionState
from fabricops.store.bulk import insert_rows
from fabricops.store.models import ACTION_LOG, ACTIONS, ActionRow
from fabricops.store.queries import action_log_rows, action_row

ACTION_KEY: Final = ("id",)
ACTION_LOG_KEY: Final = ("action_id", "seq")


class BodyDecodeError(Exception):
    """The stored body of an action no longer decodes; the message names the action
    and the cause."""


@dataclass(frozen=True)
class Outcome:
    """What one write of an action did.

    ``action`` is the action as stored when the transaction ends (None: no
    action has that id). ``refused`` says why nothing was written, naming the
    id, the stored state and what was asked ("" if not refused). ``written``
    and ``logged`` count the ``actions`` and ``action_log`` rows written.
    """

    action: Action | None
    refused: str = ""
    written: int = 0
    logged: int = 0


def put(conn: Connection, *, action: Action, prior: Action | None) -> Outcome:
    """Insert ``action`` (``prior`` None; a stored one is kept) or update it from ``prior``:
    refused unless the stored audit trail has ``len(prior.audit)`` entries and
    ``action``'s begins with them."""
    if prior is None:
        if insert_rows(conn, ACTIONS, [action_row(action)], key=ACTION_KEY):
            return Outcome(action, written=1, logged=_log(conn, action, since=0))
        stored = _read(conn, action.id)
        return Outcome(None if stored is None else stored[1])
    stored = _read(conn, action.id)
    if stored is None:
        return Outcome(None)
    body, current = stored
    n = len(current.audit)
    if n != len(prior.audit):
        return Outcome(current, refused=(
            f"action {action.id} is {current.state.value} with {n} audit entries; this "
            f"update to {action.state.value} was made from a version with "
            f"{len(prior.audit)} (another writer changed it first)"))
    if action.audit[:n] != current.audit:
        return Outcome(current, refused=(
            f"action {action.id} is {current.state.value}: this update to "
            f"{action.state.value} does not extend its stored audit trail of {n} entries"))
    return _replace(conn, body, current, action)


def move(conn: Connection, *, action_id: str, to: ActionState | None, actor: str, note: str,
         ts_ns: int, request: str | None) -> Outcome:
    """Move the stored action to ``to`` (None: its state) with an audit entry by ``actor``;
    ``request`` replaces its request if given."""
    stored = _read(conn, action_id)
    if stored is None:
        return Outcome(None)
    body, current = stored
    state = current.state if to is None else ActionState(to)
    allowed = TRANSITIONS[current.state]
    if state is not current.state and state not in allowed:
        goes = ", ".join(sorted(s.value for s in allowed)) or "nowhere, it is final"
        return Outcome(current, refused=(
            f"action {action_id} is {current.state.value}: it cannot move to {state.value} "
            f"(from {current.state.value} it goes to {goes})"))
    changes = {} if request is None else {"request": request}
    moved = current.moved(state, ts_ns=ts_ns, actor=actor, note=note, **changes)
    return _replace(conn, body, current, moved)


def decode(rows: Sequence[Row[Any]]) -> tuple[list[Action], list[tuple[str, str]]]:
    """The actions of rows with ``id`` and ``body``, and (id, cause) of each body
    that no longer decodes."""
    found: list[Action] = []
    broken: list[tuple[str, str]] = []
    for row in rows:
        try:
            found.append(Action.decode(bytes(row.body)))
        except ValidationError as exc:
            broken.append((row.id, describe_invalid(exc)))
    return found, broken


def describe_invalid(exc: ValidationError) -> str:
    """One line naming what is wrong with a stored body (up to three fields)."""
    causes = [f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()]
    more = len(causes) - 3
    return "; ".join(causes[:3]) + (f" (and {more} more)" if more > 0 else "")


def _read(conn: Connection, action_id: str) -> tuple[bytes, Action] | None:
    """The stored body of ``action_id`` and its action, locked until the transaction ends.

    BodyDecodeError if the body no longer decodes."""
    if conn.dialect.name == "sqlite":
        conn.execute(update(ACTIONS).where(ActionRow.id == action_id)
                     .values(state=ActionRow.state))
    stmt = select(ActionRow.body).where(ActionRow.id == action_id).with_for_update()
    body = conn.execute(stmt).scalar_one_or_none()
    if body is None:
        return None
    try:
        return bytes(body), Action.decode(bytes(body))
    except ValidationError as exc:
        raise BodyDecodeError(f"the stored action {action_id} no longer decodes: "
                              f"{describe_invalid(exc)}") from exc


def _replace(conn: Connection, body: bytes, current: Action, new: Action) -> Outcome:
    """Write ``new`` over the row if it still holds ``body``, and log its new entries."""
    stmt = update(ACTIONS).where(ActionRow.id == new.id, ActionRow.body == body) \
        .values(action_row(new))
    if conn.execute(stmt).rowcount != 1:
        return Outcome(current, refused=(
            f"action {new.id} was {current.state.value} and changed while this writer moved "
            f"it to {new.state.value} (another writer changed it first)"))
    return Outcome(new, written=1, logged=_log(conn, new, since=len(current.audit)))


def _log(conn: Connection, action: Action, *, since: int) -> int:
    return insert_rows(conn, ACTION_LOG, action_log_rows(action, since=since),
                       key=ACTION_LOG_KEY)
