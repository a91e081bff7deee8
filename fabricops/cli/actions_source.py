"""Where ``fabricops actions`` reads and decides: a running API or a store.

- ``--api URL`` (or ``$FABRICOPS_API_URL``): every read and decision goes to
  that API, so every operator sees and changes the same actions, and nobody
  needs the database's credentials.
- ``--db URL`` (or ``$FABRICOPS_STORE__URL``): the store is read directly.
- Neither: the API at the default address (where ``fabricops up`` listens) when
  one answers there within half a second, else the default store.

Failures are one line: an unknown id or an unreachable source is bad input
(exit 2); a decision the action's state does not allow, or a concurrent change,
is refused (exit 1).
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Protocol

import typer
from pydantic import ValidationError

from fabricops.cli.api_client import DEFAULT_API, ApiClient, ApiError, read_token
from fabricops.cli.common import fail, user_errors
from fabricops.cli.query import DEFAULT_DB, opened
from fabricops.core.actions import Action, ActionState

if TYPE_CHECKING:
    from fabricops.remediation.decisions import Verb

#: Exit code for a decision the action's state does not allow (bad input exits 2).
EXIT_REFUSED = 1
PROBE_TIMEOUT_S = 0.5

Api = Annotated[str | None, typer.Option(
    "--api", envvar="FABRICOPS_API_URL", show_default=False,
    help="Read and decide through this running fabricops API (the same view for "
         "everyone); default: the API at 127.0.0.1:8080 when one answers, else the store")]
Db = Annotated[str | None, typer.Option(
    "--db", envvar="FABRICOPS_STORE__URL", show_default=False,
    help=f"Read and decide in this store directly: sqlite:///PATH or "
         f"postgresql://USER@HOST/DB (default {DEFAULT_DB})")]


def operator_name(given: str | None) -> str:
    """The name recorded as operator:NAME: ``given``, else the login name."""
    if given:
        return given
    try:
        return os.environ.get("USER") or getpass.getuser()
    except (OSError, KeyError):
        return "unnamed"


def refuse(message: str) -> typer.Exit:
    """Print ``error: <message>`` to stderr; return the Exit (code 1) to raise."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(EXIT_REFUSED)


class ActionsSource(Protocol):
    """Reads and decisions on actions, wherever they are kept."""

    where: str

    def actions(self, state: ActionState | None, limit: int) -> list[Action]: ...

    def action(self, action_id: str) -> Action: ...

    def decide(self, action_id: str, verb: Verb, by: str, note: str) -> Action: ...


class StoreActions:
    """Actions in a store, opened for each call."""

    def __init__(self, url: str) -> None:
        self.where = url

    def actions(self, state: ActionState | None, limit: int) -> list[Action]:
        with opened(self.where) as store, _store_errors():
            return list(store.actions(state=state, limit=limit))

    def action(self, action_id: str) -> Action:
        with opened(self.where) as store, _store_errors():
            found = store.action(action_id)
        if found is None:
            raise _unknown(action_id, self.where)
        return found

    def decide(self, action_id: str, verb: Verb, by: str, note: str) -> Action:
        from fabricops.remediation.decisions import DecisionError, UnknownActionError, decide

        with opened(self.where) as store, _store_errors():
            try:
                return decide(store, action_id, verb, actor=f"operator:{by}", note=note)
            except UnknownActionError:
                raise _unknown(action_id, self.where) from None
            except DecisionError as exc:
                raise refuse(str(exc)) from None


class ApiActions:
    """Actions through a running API's ``/api/v1/actions`` routes."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.where = client.base_url

    def actions(self, state: ActionState | None, limit: int) -> list[Action]:
        params: dict[str, str | int] = {"limit": limit}
        if state is not None:
            params["state"] = state.value
        with self._errors(None):
            return [Action.model_validate(a) for a in self.client.get("/api/v1/actions",
                                                                      **params)]

    def action(self, action_id: str) -> Action:
        with self._errors(action_id):
            return Action.model_validate(self.client.get(f"/api/v1/actions/{action_id}"))

    def decide(self, action_id: str, verb: Verb, by: str, note: str) -> Action:
        with self._errors(action_id):
            return Action.model_validate(self.client.post(
                f"/api/v1/actions/{action_id}/{verb.value}", {"by": by, "note": note}))

    @contextmanager
    def _errors(self, action_id: str | None) -> Iterator[None]:
        try:
            yield
        except ApiError as exc:
            if exc.status == 404 and action_id is not None:
                raise _unknown(action_id, self.where) from None
            if exc.status == 409:
                raise refuse(exc.detail) from None
            if exc.status in (401, 403):
                raise fail(f"{exc} (pass --token or set FABRICOPS_API_TOKEN)") from None
            raise fail(str(exc)) from None
        except ValidationError as exc:
            raise fail(f"{self.where} answered an action this version cannot read: "
                       f"{exc.errors()[0]['msg']}") from None


def open_source(api: str | None, db: str | None, token: str = "") -> ActionsSource:
    """The source the options name; see the module docstring for the default."""
    if api and db:
        raise fail("give either --api or --db, not both")
    if db:
        return StoreActions(db)
    if api:
        with user_errors():
            try:
                return ApiActions(ApiClient(api, read_token(token)))
            except ApiError as exc:
                raise fail(str(exc)) from None
    if _answers(DEFAULT_API):
        return ApiActions(ApiClient(DEFAULT_API, read_token(token)))
    return StoreActions(DEFAULT_DB)


def _answers(base_url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{base_url}/health", timeout=PROBE_TIMEOUT_S).status_code == 200
    except httpx.HTTPError:
        return False


def _unknown(action_id: str, where: str) -> typer.Exit:
    return fail(f"no action has id {action_id!r} in {where} (fabricops actions list "
                f"shows the latest)")


@contextmanager
def _store_errors() -> Iterator[None]:
    """A refused write exits 1; any other store failure, like bad input, exits 2."""
    from fabricops.store.store import ActionConflict, StoreError

    with user_errors():
        try:
            yield
        except ActionConflict as exc:
            raise refuse(str(exc)) from None
        except StoreError as exc:
            raise fail(str(exc)) from None
