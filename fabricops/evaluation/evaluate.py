"""Evaluate the RCA on held-out scenarios, beside two baselines measured in the same run.

Methods: ``model`` (the full RCA), ``rules`` (threshold rules alone: the most
severe symptom names the root and type) and ``votes`` (path voting alone: the
link with most votes from flows that saw loss; it can only name links, and
calls everything gray loss). Per faulty scenario, each method's answer at the
end of the observation window is scored: top-1 / top-3 root entity and fault
type. Time to diagnosis is from the fault's onset to the first step whose
top-1 root is right. False diagnoses are incidents raised on fault-free
traffic: healthy scenarios, and every scenario's warm-up before its fault.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from fabricops.core.faults import FaultType
from fabricops.rca.model import RcaModel
from fabricops.evaluation.replay import ReplayResult, map_scenarios, replay
from fabricops.evaluation.scenarios import EVAL_SEED, make

METHODS: Final = ("model", "rules", "votes")
Progress = Callable[[int, int], None]


@dataclass
class Scored:
    """One method's result on one scenario."""

    top1: bool = False
    top3: bool = False
    true_type: str = ""
    pred_type: str = "none"
    ttd_s: float | None = None
    false_incidents: int = 0


@dataclass
class ScenarioScore:
    index: int
    topology: str
    healthy: bool
    healthy_s: float
    methods: dict[str, Scored] = field(default_factory=dict)
    touched: bool = True  # the fault reached traffic (else no telemetry can show it)


def _answers(r: ReplayResult, method: str) -> list[tuple[float, list[str], str, str]]:
    """Per tick: (t_s, ranked root names, fault type, incident id) or nothing."""
    names = r.candidates.names
    out = []
    for t in r.ticks:
        if method == "model" and t.diagnosis is not None:
            d = t.diagnosis
            out.append((t.t_s, [d.root] + [e.entity for e in d.ranked if e.entity != d.root],
                        d.fault_type, d.id))
        elif method == "rules" and t.rules:
            out.append((t.t_s, [names[c] for c, _ in t.rules[:3]], t.rules[0][1], "rules"))
        elif method == "votes" and t.votes:
            out.append((t.t_s, [names[c] for c in t.votes[:3]], "gray_loss", "votes"))
    return out


def score(r: ReplayResult) -> ScenarioScore:
    ls = r.scenario
    onset = ls.onset_s
    end = r.ticks[-1].t_s if r.ticks else 0.0
    healthy_until = end if onset is None else onset
    out = ScenarioScore(ls.index, ls.topology[0], ls.healthy, max(0.0, healthy_until - 1.0),
                        touched=r.touched)
    names = r.candidates.names
    truth = [({names[i] for i in roots}, ftype, start) for roots, ftype, start in r.truth]
    for method in METHODS:
        s = Scored()
        answers = _answers(r, method)
        early = [a for a in answers if onset is None or a[0] <= onset]
        s.false_incidents = _incidents(early)
        late = [a for a in answers if onset is not None and a[0] > onset]
        if truth:
            s.true_type = truth[0][1]
            roots = set().union(*(t[0] for t in truth))
            if late:
                _, ranked, ftype, _ = late[-1]
                s.top1 = ranked[0] in roots
                s.top3 = any(e in roots for e in ranked[:3])
                hit = next((t for t in truth if ranked[0] in t[0]), truth[0])
                s.true_type = hit[1]
                s.pred_type = ftype
            for t_s, ranked, _, _ in late:
                match = next((t for t in truth if ranked[0] in t[0]), None)
                if match is not None:
                    s.ttd_s = t_s - match[2]
                    break
        out.methods[method] = s
    return out


def _incidents(answers: list[tuple[float, list[str], str, str]]) -> int:
    """Distinct incidents: model ids, or runs of consecutive baseline answers."""
    if not answers:
        return 0
    ids = {a[3] for a in answers if a[3] not in ("rules", "votes")}
    runs = 0
    last = -10.0
    for t_s, _, _, ident in answers:
        if ident in ("rules", "votes") and t_s - last > 1.5:
            runs += 1
        last = t_s
    return len(ids) + runs


def _one(args: tuple[int, int, str | None, float | None]) -> ScenarioScore:
    index, seed, model_path, duration = args
    model = RcaModel.load(model_path) if model_path else None
    healthy = duration is not None
    ls = make(index, seed, healthy_share=1.0 if healthy else 0.0, duration_s=duration)
    return score(replay(ls, model))


def run(model_path: str | Path, n: int, *, healthy_runs: int = 4, healthy_s: float = 900.0,
        seed: int = EVAL_SEED, workers: int = 2,
        progress: Progress | None = None) -> list[ScenarioScore]:
    """Score ``n`` held-out faulty scenarios and ``healthy_runs`` long fault-free runs."""
    jobs: list[tuple[int, int, str | None, float | None]] = [
        (i, seed, str(model_path), None) for i in range(n)]
    jobs += [(10_000 + i, seed, str(model_path), healthy_s) for i in range(healthy_runs)]
    jobs = jobs[n:] + jobs[:n]  # long runs first, so both workers stay busy
    return list(map_scenarios(_one, jobs, workers=workers, progress=progress))


def summary(scores: list[ScenarioScore]) -> dict[str, Any]:
    """Per method: accuracy, per-type P/R/F1, false diagnoses per healthy hour, latency."""
    faulty = [s for s in scores if not s.healthy]
    healthy_h = sum(s.healthy_s for s in scores) / 3600.0
    result: dict[str, Any] = {"scenarios": len(faulty), "healthy_hours": round(healthy_h, 3),
                              "untouched": sum(1 for s in faulty if not s.touched),
                              "topologies": sorted({s.topology for s in faulty}),
                              "methods": {}}
    types = [t.value for t in FaultType]
    for method in METHODS:
        ms = [s.methods[method] for s in faulty]
        per_type = {}
        for t in types:
            tp = sum(1 for m in ms if m.pred_type == t and m.true_type == t)
            fp = sum(1 for m in ms if m.pred_type == t and m.true_type != t)
            fn = sum(1 for m in ms if m.true_type == t and m.pred_type != t)
            p = tp / (tp + fp) if tp + fp else 0.0
            r = tp / (tp + fn) if tp + fn else 0.0
            f1 = 2 * p * r / (p + r) if p + r else 0.0
            per_type[t] = {"precision": p, "recall": r, "f1": f1, "n": tp + fn}
        ttd = [m.ttd_s for m in ms if m.ttd_s is not None]
        seen = [s.methods[method] for s in faulty if s.touched]
        result["methods"][method] = {
            "top1": float(np.mean([m.top1 for m in ms])) if ms else 0.0,
            "top3": float(np.mean([m.top3 for m in ms])) if ms else 0.0,
            "top1_touched": float(np.mean([m.top1 for m in seen])) if seen else 0.0,
            "top3_touched": float(np.mean([m.top3 for m in seen])) if seen else 0.0,
            "macro_f1": float(np.mean([v["f1"] for v in per_type.values()])),
            "per_type": per_type,
            "false_per_hour": (sum(s.methods[method].false_incidents for s in scores)
                               / max(healthy_h, 1e-9)),
            "false_total": sum(s.methods[method].false_incidents for s in scores),
            "ttd_median_s": float(np.median(ttd)) if ttd else None,
            "ttd_p90_s": float(np.percentile(ttd, 90)) if ttd else None,
            "located": len(ttd),
            "by_topology": dict(Counter(s.topology for s in faulty)),
        }
    return result
