"""Score replayed scenarios: every fault must be named, unobservable faults are set aside.

Methods: ``model`` (the full RCA: every diagnosis of a step), ``rules``
(threshold rules alone: the most severe symptom names one root and its type)
and ``votes`` (path voting alone: the link with most votes from flows that saw
loss; it can only name links, and calls everything gray loss).

A method's answer is what it shows at the end of the observation window: for
the model, the latest diagnosis of every incident still open (revised within
the last ``FINAL_S`` seconds, the engine's default ``clear_s``: the open
incidents an operator sees); for a baseline, its answers of that span. Each
injected fault is scored on its own: named (top-1) when an answer's root is one
of the fault's roots, top-3 when one of an answer's first three entities is.
A scenario is correct only when every observable fault in it is named: with
two faults, naming one is a miss.

A fault is observable when the ground truth says it reached traffic before the
window closed (``ReplayResult.seen_s``): loss on a direction nothing crosses, or
a hash change on a switch whose flows keep their paths, shows in no telemetry.
Such faults are counted as ``unobservable`` and excluded from accuracy; a
scenario with no observable fault is excluded as a whole. An answer that names
no injected fault is an ``extra`` root (a false diagnosis during a fault).
False incidents are incidents raised on fault-free traffic: healthy soaks, and
every scenario's warm-up before its first fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from fabricops.evaluation.replay import ReplayResult

METHODS: Final = ("model", "rules", "votes")
FINAL_S: Final = 10.0


@dataclass(frozen=True)
class Answer:
    """One root a method names: the root, its ranked entities, type and confidence."""

    t_s: float
    ranked: tuple[str, ...]
    fault_type: str
    confidence: float
    incident: str


@dataclass
class FaultScore:
    """One injected fault, as one method saw it."""

    fault_type: str
    entity: str
    observable: bool
    top1: bool = False
    top3: bool = False
    pred_type: str = "none"
    ttd_s: float | None = None


@dataclass
class MethodScore:
    faults: list[FaultScore] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)  # fault types of answers naming no fault
    calibration: list[tuple[float, bool]] = field(default_factory=list)
    false_incidents: int = 0

    @property
    def observable(self) -> list[FaultScore]:
        return [f for f in self.faults if f.observable]

    @property
    def all_top1(self) -> bool:
        return bool(self.observable) and all(f.top1 for f in self.observable)

    @property
    def all_top3(self) -> bool:
        return bool(self.observable) and all(f.top3 for f in self.observable)


@dataclass
class ScenarioScore:
    index: int
    shape: str
    family: str
    healthy: bool
    healthy_s: float
    during_flap: bool = False
    methods: dict[str, MethodScore] = field(default_factory=dict)

    @property
    def counted(self) -> bool:
        """Faulty, with at least one observable fault: it counts towards accuracy."""
        return not self.healthy and bool(self.methods["model"].observable)


def answers(r: ReplayResult, method: str) -> list[list[Answer]]:
    """Per tick: every root the method named at that tick."""
    names = r.candidates.names
    out: list[list[Answer]] = []
    for t in r.ticks:
        if method == "model":
            out.append([Answer(t.t_s, (d.root, *(e.entity for e in d.ranked if e.entity != d.root)),
                               d.fault_type, d.confidence, d.id)
                        for d in (t.diagnoses or ((t.diagnosis,) if t.diagnosis else ()))])
        elif method == "rules" and t.rules:
            out.append([Answer(t.t_s, tuple(names[c] for c, _ in t.rules[:3]), t.rules[0][1],
                               1.0, "rules")])
        elif method == "votes" and t.votes:
            out.append([Answer(t.t_s, tuple(names[c] for c in t.votes[:3]), "gray_loss", 1.0,
                               "votes")])
        else:
            out.append([])
    return out


def final_answers(per_tick: list[list[Answer]], end_s: float) -> list[Answer]:
    """The latest answer of every incident revised within ``FINAL_S`` of the end (a
    baseline's answers all count as one incident: only its latest is kept)."""
    latest: dict[str, Answer] = {}
    for tick in per_tick:
        for a in tick:
            if a.t_s >= end_s - FINAL_S + 1e-9:
                latest[a.incident] = a
    return list(latest.values())


def _incidents(per_tick: list[list[Answer]], before_s: float | None) -> int:
    """Distinct incidents raised up to ``before_s``: model ids, or runs of baseline answers."""
    ids: set[str] = set()
    runs, last = 0, -10.0
    for tick in per_tick:
        for a in tick:
            if before_s is not None and a.t_s > before_s:
                continue
            if a.incident in ("rules", "votes"):
                runs += a.t_s - last > 1.5
                last = a.t_s
            else:
                ids.add(a.incident)
    return len(ids) + runs


def score(r: ReplayResult, *, during_flap: bool = False) -> ScenarioScore:
    ls = r.scenario
    onset = ls.onset_s
    end = r.ticks[-1].t_s if r.ticks else 0.0
    healthy_until = end if onset is None else onset
    out = ScenarioScore(ls.index, ls.shape or ls.topology[0], ls.topology[0], ls.healthy,
                        max(0.0, healthy_until - 1.0), during_flap)
    names = r.candidates.names
    seen = r.seen_s or [0.0] * len(r.truth)
    truth = [({names[i] for i in roots}, ftype, start, s)
             for (roots, ftype, start), s in zip(r.truth, seen, strict=True)]
    entities = [f["entity"] for f in ls.faults]
    for method in METHODS:
        per_tick = answers(r, method)
        m = MethodScore(false_incidents=_incidents(per_tick, onset if onset is not None
                                                   else end))
        final = final_answers(per_tick, end) if truth else []
        for k, (roots, ftype, start, s) in enumerate(truth):
            f = FaultScore(ftype, entities[k] if k < len(entities) else "", s is not None)
            hit = next((a for a in final if a.ranked[0] in roots), None)
            f.top1 = hit is not None
            f.pred_type = hit.fault_type if hit else "none"
            f.top3 = any(e in roots for a in final for e in a.ranked[:3])
            for tick in per_tick:
                if any(a.t_s > start and a.ranked[0] in roots for a in tick):
                    f.ttd_s = tick[0].t_s - start
                    break
            m.faults.append(f)
        all_roots = set().union(*(t[0] for t in truth)) if truth else set()
        for a in final:
            right = a.ranked[0] in all_roots
            if not right:
                m.extra.append(a.fault_type)
            if method == "model":
                m.calibration.append((a.confidence, right))
        out.methods[method] = m
    return out
