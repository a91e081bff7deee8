"""``fabricops actions``: the remediation actions in the store, and an operator's say on them.

Every decision is one compare-and-set write (``Store.put_action`` with the
version read): if the remediation service moved the action in the meantime,
nothing is written and the command says what the action is now (exit 1).
An unknown id, or a store that cannot be opened, is bad input (exit 2).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fabricops.cli.common import fail, stdout_console, user_errors
from fabricops.cli.query import DEFAULT_DB, AsJson, Db, opened
from fabricops.core.actions import Action, ActionState, Step
from fabricops.core.wording import counted
from fabricops.remediation.decisions import DecisionError, UnknownActionError, Verb, decide
from fabricops.store.store import ActionConflict, Store, StoreError

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Remediation actions: what fabricops proposes (or did) about each diagnosis, with "
         "their steps, undo steps and audit trail. Approve or reject proposed actions; ask "
         "for an applied one to be rolled back. The remediation service carries decisions "
         "out at its next poll.",
)

#: Exit code for a decision the action's state does not allow (bad input exits 2).
EXIT_REFUSED = 1

ActionId = Annotated[str, typer.Argument(
    help="The action's id, as fabricops actions list shows it", show_default=False)]
By = Annotated[str | None, typer.Option(
    "--by", help="Your name, recorded as operator:NAME (default: $USER, else operator)",
    show_default=False)]
Note = Annotated[str, typer.Option("--note", help="Why, in words; kept in the audit trail")]


@app.command("list")
def list_actions(
    db: Db = DEFAULT_DB,
    state: Annotated[ActionState | None, typer.Option(help="Only actions in this state")]
    = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many")] = 50,
    as_json: AsJson = False,
) -> None:
    """The actions changed last, newest first.

    Examples: [bold]fabricops actions list --state proposed[/bold] (what waits for you),
    [bold]fabricops actions list --json --limit 500[/bold]
    """
    with opened(db) as store, _store_errors():
        found = store.actions(state=state, limit=limit)
    if as_json:
        typer.echo(json.dumps([a.model_dump(mode="json") for a in found]))
        return
    console = stdout_console()
    if not found:
        console.print(f"no actions{f' in state {state.value}' if state else ''} in the store")
        return
    console.print(actions_table(found))


@app.command()
def show(action_id: ActionId, db: Db = DEFAULT_DB, as_json: AsJson = False) -> None:
    """One action: what it does, why, to whom, how to undo it, and its audit trail.

    Example: [bold]fabricops actions show drain-3f2a9c[/bold]
    """
    with opened(db) as store, _store_errors():
        action = _stored(store, action_id)
    if as_json:
        typer.echo(json.dumps(action.model_dump(mode="json")))
        return
    describe(stdout_console(), action)


@app.command()
def approve(action_id: ActionId, by: By = None, note: Note = "", db: Db = DEFAULT_DB) -> None:
    """Approve a proposed action; the remediation service applies it at its next poll.

    The audit trail records operator:NAME, the time and your note.
    Example: [bold]fabricops actions approve drain-3f2a9c --note "change CHG-1234"[/bold]
    """
    action = _decide(db, action_id, Verb.APPROVE, by, note)
    console = stdout_console()
    console.print(f"action {escape(action.id)} approved by {escape(action.audit[-1].actor)}: "
                  f"the remediation service applies it at its next poll "
                  f"({_count(action.steps)}):")
    _print_steps(console, action.steps)


@app.command()
def reject(action_id: ActionId, by: By = None, note: Note = "", db: Db = DEFAULT_DB) -> None:
    """Reject a proposed (or approved, not yet applied) action; nothing will be applied.

    Example: [bold]fabricops actions reject drain-3f2a9c --note "job checkpoints at 14:00"[/bold]
    """
    action = _decide(db, action_id, Verb.REJECT, by, note)
    stdout_console().print(f"action {escape(action.id)} rejected by "
                           f"{escape(action.audit[-1].actor)}: nothing will be applied")


@app.command()
def rollback(action_id: ActionId, by: By = None, note: Note = "", db: Db = DEFAULT_DB) -> None:
    """Ask the remediation service to undo an applied or verified action.

    The action keeps its state, marked with a rollback request; at its next poll
    the service runs the undo steps in order and marks it rolled_back (or failed).
    Example: [bold]fabricops actions rollback drain-3f2a9c --note "link replaced"[/bold]
    """
    action = _decide(db, action_id, Verb.ROLLBACK, by, note)
    console = stdout_console()
    console.print(f"rollback of action {escape(action.id)} requested by "
                  f"{escape(action.audit[-1].actor)}: the remediation service undoes "
                  f"{_count(action.undo)} at its next poll:")
    _print_steps(console, action.undo)


def actions_table(found: Sequence[Action]) -> Table:
    """One row per action: what, where, how sure, when it last changed."""
    table = Table(title=f"{counted(len(found), 'action')}, newest change first",
                  title_justify="left")
    for column in ("id", "state", "mode", "kind", "target", "fault type", "confidence",
                   "last change (UTC)", "diagnosis"):
        table.add_column(column, justify="right" if column == "confidence" else "left",
                         no_wrap=column in ("id", "last change (UTC)"))
    for a in found:
        state = a.state.value + (f" ({a.request} requested)" if a.request else "")
        table.add_row(escape(a.id), state, a.mode.value, a.kind.value, escape(a.target),
                      escape(a.fault_type), f"{a.confidence:.0%}", _when(a.ts_ns),
                      escape(a.diagnosis_id))
    return table


def describe(console: Console, a: Action) -> None:
    """Everything about one action, for a person deciding on it."""
    console.print(f"[bold]action {escape(a.id)}[/bold]: {a.kind.value} {escape(a.target)}, "
                  f"[bold]{a.state.value}[/bold] (mode {a.mode.value})")
    if a.request:
        console.print(f"{escape(a.request)} requested, waiting for the remediation service")
    console.print(f"diagnosis {escape(a.diagnosis_id)}: {escape(a.fault_type) or 'no fault type'}"
                  f", confidence {a.confidence:.0%}")
    console.print(f"created {_when(a.created_ns)} UTC, last change {_when(a.ts_ns)} UTC")
    console.print(f"reason: {escape(a.reason) or '(none given)'}")
    console.print(f"affected hosts: {escape(', '.join(a.affected_hosts)) or 'none'}")
    console.print(f"affected jobs: {escape(', '.join(a.affected_jobs)) or 'none'}")
    console.print(steps_table("steps", a.steps))
    console.print(steps_table("undo steps (filled as steps are applied)", a.undo))
    console.print(audit_table(a))


def steps_table(title: str, steps: Sequence[Step]) -> Table:
    """Steps in the order they run, with their parameters."""
    table = Table(title=f"{title}: {len(steps)}", title_justify="left")
    for column in ("#", "operation", "target", "parameters"):
        table.add_column(column, justify="right" if column == "#" else "left")
    for i, step in enumerate(steps, start=1):
        params = " ".join(f"{k}={v}" for k, v in sorted(step.params.items()))
        table.add_row(str(i), step.op.value, escape(step.target), escape(params))
    return table


def audit_table(a: Action) -> Table:
    """Every move of the action: when, who, the state after it, and why."""
    table = Table(title="audit trail", title_justify="left")
    for column in ("#", "time (UTC)", "actor", "state", "note"):
        table.add_column(column, justify="right" if column == "#" else "left",
                         no_wrap=column == "time (UTC)")
    for i, entry in enumerate(a.audit):
        table.add_row(str(i), _when(entry.ts_ns), escape(entry.actor), entry.state.value,
                      escape(entry.note))
    return table


def _decide(db: str, action_id: str, verb: Verb, by: str | None, note: str) -> Action:
    """Record an operator's decision on an action; return it as stored."""
    actor = f"operator:{by or os.environ.get('USER') or 'operator'}"
    with opened(db) as store, _store_errors():
        try:
            return decide(store, action_id, verb, actor=actor, note=note)
        except UnknownActionError:
            raise fail(f"no action has id {action_id!r} in {store.url} (fabricops actions "
                       f"list shows the latest)") from None
        except DecisionError as exc:
            raise refuse(str(exc)) from None


def refuse(message: str) -> typer.Exit:
    """Print ``error: <message>`` to stderr; return the Exit (code 1) to raise."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(EXIT_REFUSED)


@contextmanager
def _store_errors() -> Iterator[None]:
    """A refused write exits 1; any other store failure, like bad input, exits 2."""
    with user_errors():
        try:
            yield
        except ActionConflict as exc:
            raise refuse(str(exc)) from None
        except StoreError as exc:
            raise fail(str(exc)) from None


def _stored(store: Store, action_id: str) -> Action:
    action = store.action(action_id)
    if action is None:
        raise fail(f"no action has id {action_id!r} in {store.url} (fabricops actions list "
                   f"shows the latest)")
    return action


def _print_steps(console: Console, steps: Sequence[Step]) -> None:
    for i, step in enumerate(steps, start=1):
        console.print(f"  {i}. {escape(step.describe())}")


def _count(steps: Sequence[Step]) -> str:
    return f"{len(steps)} step{'' if len(steps) == 1 else 's'}"


def _when(ts_ns: int) -> str:
    return datetime.fromtimestamp(ts_ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")
