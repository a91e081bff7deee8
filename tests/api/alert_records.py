"""For the alert tests: a diagnosis, its action in each state, receivers, counters read."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from fabricops.api.alerts import AlertReceiver, AlertsConfig
from fabricops.core.actions import Action, ActionKind, ActionMode, ActionState
from fabricops.core.records import Diagnosis

S = 1_000_000_000
T0 = 1_767_225_600 * S
LINK = "leaf-0:eth1~spine-1:eth3"
SECRET = "team-secret"


def diagnosis(incident: str = "inc-1", t_s: int = 0, *, root: str = LINK,
              fault_type: str = "gray_loss", confidence: float = 0.9) -> Diagnosis:
    return Diagnosis(id=incident, ts_ns=T0 + t_s * S, onset_ns=T0 - 5 * S, root=root,
                     root_kind="link", fault_type=fault_type, confidence=confidence,
                     affected_hosts=("host-3", "host-7"), affected_jobs=("job-42",),
                     action="drain the link", model_version="rca/1")


def action(state: ActionState, incident: str = "inc-1", *, t_s: int = 10,
           confidence: float = 0.9) -> Action:
    """The drain of ``incident``'s link, proposed at T0 + ``t_s`` and moved to ``state``."""
    created = T0 + t_s * S
    moved = Action(id=f"act-{incident}", diagnosis_id=incident, created_ns=created,
                   ts_ns=created, kind=ActionKind.DRAIN_LINK, target=LINK,
                   fault_type="gray_loss", confidence=confidence, mode=ActionMode.AUTO,
                   ).moved(ActionState.PROPOSED, ts_ns=created, actor="policy")
    path = [ActionState.APPROVED, ActionState.APPLIED, ActionState.VERIFIED]
    for i, step in enumerate(path[:path.index(state) + 1] if state in path else [], 1):
        moved = moved.moved(step, ts_ns=created + i * S, actor="safety")
    return moved


def hook(name: str, url: str, **options: Any) -> AlertReceiver:
    return AlertReceiver.model_validate({"name": name, "url": url, "secret": SECRET,
                                         **options})


def fast(*receivers: AlertReceiver, **options: Any) -> AlertsConfig:
    """Short backoff and polling, so tests see retries within a second."""
    return AlertsConfig.model_validate({"receivers": receivers, "backoff_s": 0.05,
                                        "max_backoff_s": 0.2, "poll_interval_s": 0.05,
                                        **options})


def sample(registry: CollectorRegistry, name: str, receiver: str | None = None) -> float:
    labels = {} if receiver is None else {"receiver": receiver}
    return registry.get_sample_value(name, labels) or 0.0
