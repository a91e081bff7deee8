"""``fabricops actions``: the remediation actions, and an operator's say on them.

Reads and decisions go to a running API (``--api``, or the one at the default
address when it answers) or straight to a store (``--db``); see
:mod:`fabricops.cli.actions_source`. Every decision is one compare-and-set
write: if the remediation service moved the action in the meantime, nothing is
written and the command says what the action is now (exit 1). An unknown id,
or a source that cannot be reached, is bad input (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fabricops.cli.actions_source import Api, Db, open_source, operator_name
from fabricops.cli.api_client import ApiToken
from fabricops.cli.common import stdout_console
from fabricops.cli.query import AsJson
from fabricops.core.actions import Action, ActionState, Step
from fabricops.core.wording import counted
from fabricops.remediation.decisions import Verb

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Remediation actions: what fabricops proposes (or did) about each diagnosis, with "
         "their steps, undo steps and audit trail. Approve or reject proposed actions; ask "
         "for an applied one to be rolled back. The remediation service carries decisions "
         "out at its next poll. Talks to the running API (--api, or the one at "
         "127.0.0.1:8080 when it answers) or to a store (--db).",
)

ActionId = Annotated[str, typer.Argument(
    help="The action's id, as fabricops actions list shows it", show_default=False)]
By = Annotated[str | None, typer.Option(
    "--by", help="Your name, recorded as operator:NAME (default: your login name)",
    show_default=False)]
Note = Annotated[str, typer.Option("--note", help="Why, in words; kept in the audit trail")]


@app.command("list")
def list_actions(
    state: Annotated[ActionState | None, typer.Option(help="Only actions in this state")]
    = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many")] = 50,
    as_json: AsJson = False,
    api: Api = None,
    db: Db = None,
    token: ApiToken = "",
) -> None:
    """The actions changed last, newest first.

    Examples: [bold]fabricops actions list --state proposed[/bold] (what waits for you),
    [bold]fabricops actions list --json --limit 500[/bold]
    """
    source = open_source(api, db, token)
    found = source.actions(state, limit)
    if as_json:
        typer.echo(json.dumps([a.model_dump(mode="json") for a in found]))
        return
    console = stdout_console()
    if not found:
        console.print(f"no actions{f' in state {state.value}' if state else ''} in "
                      f"{escape(source.where)}")
        return
    console.print(actions_table(found))


@app.command()
def show(action_id: ActionId, as_json: AsJson = False, api: Api = None, db: Db = None,
         token: ApiToken = "") -> None:
    """One action: what it does, why, to whom, how to undo it, and its audit trail.

    Example: [bold]fabricops actions show drain-3f2a9c[/bold]
    """
    action = open_source(api, db, token).action(action_id)
    if as_json:
        typer.echo(json.dumps(action.model_dump(mode="json")))
        return
    describe(stdout_console(), action)


@app.command()
def approve(action_id: ActionId, by: By = None, note: Note = "", api: Api = None,
            db: Db = None, token: ApiToken = "") -> None:
    """Approve a proposed action; the remediation service applies it at its next poll.

    The audit trail records operator:NAME, the time and your note.
    Example: [bold]fabricops actions approve drain-3f2a9c --note "change CHG-1234"[/bold]
    """
    action = open_source(api, db, token).decide(action_id, Verb.APPROVE, operator_name(by),
                                                note)
    console = stdout_console()
    console.print(f"action {escape(action.id)} approved by {escape(action.audit[-1].actor)}: "
                  f"the remediation service applies it at its next poll "
                  f"({counted(len(action.steps), 'step')}):")
    _print_steps(console, action.steps)


@app.command()
def reject(action_id: ActionId, by: By = None, note: Note = "", api: Api = None,
           db: Db = None, token: ApiToken = "") -> None:
    """Reject a proposed (or approved, not yet applied) action; nothing will be applied.

    Example: [bold]fabricops actions reject drain-3f2a9c --note "job checkpoints at 14:00"[/bold]
    """
    action = open_source(api, db, token).decide(action_id, Verb.REJECT, operator_name(by),
                                                note)
    stdout_console().print(f"action {escape(action.id)} rejected by "
                           f"{escape(action.audit[-1].actor)}: nothing will be applied")


@app.command()
def rollback(action_id: ActionId, by: By = None, note: Note = "", api: Api = None,
             db: Db = None, token: ApiToken = "") -> None:
    """Ask the remediation service to undo an applied or verified action.

    The action keeps its state, marked with a rollback request; at its next poll
    the service runs the undo steps in order and marks it rolled_back (or failed).
    Example: [bold]fabricops actions rollback drain-3f2a9c --note "link replaced"[/bold]
    """
    action = open_source(api, db, token).decide(action_id, Verb.ROLLBACK, operator_name(by),
                                                note)
    console = stdout_console()
    console.print(f"rollback of action {escape(action.id)} requested by "
                  f"{escape(action.audit[-1].actor)}: the remediation service undoes "
                  f"{counted(len(action.undo), 'step')} at its next poll:")
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


def _print_steps(console: Console, steps: Sequence[Step]) -> None:
    for i, step in enumerate(steps, start=1):
        console.print(f"  {i}. {escape(step.describe())}")


def _when(ts_ns: int) -> str:
    return datetime.fromtimestamp(ts_ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")
