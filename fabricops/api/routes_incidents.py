"""Diagnoses, the one-click diagnosis, and the actions with an operator's say on them."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, status
from pydantic import BaseModel, ConfigDict, Field

from fabricops.api.auth import REFUSALS, Authorized, Ctx
from fabricops.api.diagnose import DiagnoseReport, build_report, open_incidents
from fabricops.api.problems import described
from fabricops.api.routes_fabric import STORE, EndNs, Limit, SinceS, StartNs, window
from fabricops.core.actions import Action, ActionState
from fabricops.core.records import Diagnosis
from fabricops.remediation.decisions import DecisionError, UnknownActionError, Verb, decide
from fabricops.store.store import ActionConflict

router = APIRouter(tags=["incidents"])

ActionId = Annotated[str, Path(max_length=64, description="The action's id")]
NO_ACTION = "No action has this id"
#: What a decision on an action can answer besides the action.
DECISION = {**REFUSALS, **STORE, **described({
    404: NO_ACTION, 409: "The action's state does not allow this decision"})}


class Decision(BaseModel):
    """Who decides and why; kept in the action's audit trail."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    by: str = Field(default="api", min_length=1, max_length=64,
                    description="Your name, recorded as operator:NAME")
    note: str = Field(default="", max_length=1000, description="Why, in words")


@router.get("/diagnoses", summary="Diagnosis revisions in a time range, oldest first",
            responses=STORE)
def diagnoses(ctx: Ctx, start_ns: StartNs = None, end_ns: EndNs = None,
              since_s: SinceS = 3600.0,
              root: Annotated[str | None, Query(max_length=255)] = None,
              limit: Limit = 1000) -> list[Diagnosis]:
    store = ctx.stored()
    span = window(start_ns, end_ns, since_s)
    if span is None:
        return []
    return store.diagnoses(t0_ns=span[0], t1_ns=span[1], root=root, limit=limit)


@router.get("/diagnose", summary="What is wrong now, where, since when, how sure, what "
                                  "fabricops did about it", responses=STORE)
def diagnose(ctx: Ctx) -> DiagnoseReport:
    store = ctx.stored()
    latest = store.latest_diagnoses(limit=50)
    now_ns = _now_ns(latest)
    opened = open_incidents(latest, now_ns=now_ns, active_s=ctx.config.active_s)
    actions = [a for d in opened for a in store.actions(diagnosis_id=d.id, limit=20)]
    return build_report(opened, actions, ctx.topology, now_ns=now_ns,
                        active_s=ctx.config.active_s)


def _now_ns(latest: list[Diagnosis]) -> int:
    """Wall clock, or the newest diagnosis if the fabric's clock runs ahead (a fast twin)."""
    return max([time.time_ns(), *(d.ts_ns for d in latest)])


@router.get("/actions", summary="The actions changed last, newest first", responses=STORE)
def actions(ctx: Ctx, state: ActionState | None = None,
            diagnosis_id: Annotated[str | None, Query(max_length=64)] = None,
            limit: Limit = 50) -> list[Action]:
    return ctx.stored().actions(state=state, diagnosis_id=diagnosis_id, limit=limit)


@router.get("/actions/{action_id}", summary="One action with its steps and audit trail",
            responses={**STORE, **described({404: NO_ACTION})})
def action(ctx: Ctx, action_id: ActionId) -> Action:
    found = ctx.stored().action(action_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no action has id {action_id!r}")
    return found


def _decide(ctx: Ctx, action_id: str, verb: Verb, body: Decision) -> Action:
    try:
        return decide(ctx.stored(), action_id, verb, actor=f"operator:{body.by}", note=body.note)
    except UnknownActionError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except (DecisionError, ActionConflict) as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None


@router.post("/actions/{action_id}/approve", dependencies=[Authorized], responses=DECISION,
             summary="Approve a proposed action; remediation applies it at its next poll")
def approve(ctx: Ctx, action_id: ActionId, body: Decision | None = None) -> Action:
    return _decide(ctx, action_id, Verb.APPROVE, body or Decision())


@router.post("/actions/{action_id}/reject", dependencies=[Authorized], responses=DECISION,
             summary="Reject a proposed or approved action; nothing is applied")
def reject(ctx: Ctx, action_id: ActionId, body: Decision | None = None) -> Action:
    return _decide(ctx, action_id, Verb.REJECT, body or Decision())


@router.post("/actions/{action_id}/rollback", dependencies=[Authorized], responses=DECISION,
             summary="Ask remediation to undo an applied or verified action")
def rollback(ctx: Ctx, action_id: ActionId, body: Decision | None = None) -> Action:
    return _decide(ctx, action_id, Verb.ROLLBACK, body or Decision())
