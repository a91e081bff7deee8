"""Summarise scenario scores: accuracy with Wilson intervals, per type, shape and family.

Every share comes with its count and a 95 % Wilson score interval (scipy's
``binomtest``), so a figure on 12 cases reads as what it is. Accuracy counts
only observable faults (see ``scoring``); the unobservable ones are counted
beside. Fault-type precision counts each extra root (an answer naming no
injected fault) as a false positive of its type. The reliability table bins the
model's final diagnoses by confidence and gives the share whose root was right.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import pairwise
from typing import Any, Final

import numpy as np
from scipy.stats import binomtest

from fabricops.core.faults import FaultType
from fabricops.evaluation.scoring import METHODS, FaultScore, MethodScore, ScenarioScore

BINS: Final = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0001)


def share(hits: Iterable[bool]) -> dict[str, Any]:
    """{n, k, rate, low, high}: a proportion with its 95 % Wilson interval."""
    xs = [bool(h) for h in hits]
    n, k = len(xs), sum(xs)
    if n == 0:
        return {"n": 0, "k": 0, "rate": None, "low": None, "high": None}
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return {"n": n, "k": k, "rate": k / n, "low": float(ci.low), "high": float(ci.high)}


def _f1(ms: list[MethodScore], t: str) -> dict[str, Any]:
    faults = [f for m in ms for f in m.observable]
    tp = sum(1 for f in faults if f.fault_type == t and f.pred_type == t)
    fp = sum(1 for f in faults if f.fault_type != t and f.pred_type == t)
    fp += sum(m.extra.count(t) for m in ms)
    fn = sum(1 for f in faults if f.fault_type == t and f.pred_type != t)
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0,
            "n": tp + fn, "named": share(f.top1 for f in faults if f.fault_type == t)}


def reliability(pairs: list[tuple[float, bool]]) -> list[dict[str, Any]]:
    """Per confidence bin: how many diagnoses, mean confidence, share right."""
    out = []
    for lo, hi in pairwise(BINS):
        got = [(c, ok) for c, ok in pairs if lo <= c < hi]
        out.append({"bin": f"{lo:.2f}-{min(hi, 1.0):.2f}", "n": len(got),
                    "confidence": float(np.mean([c for c, _ in got])) if got else None,
                    "right": share(ok for _, ok in got)})
    return out


def _grouped(scores: list[ScenarioScore], method: str,
             key: Callable[[ScenarioScore], str]) -> dict[str, Any]:
    keys = sorted({key(s) for s in scores})
    return {k: share(s.methods[method].all_top1 for s in scores if key(s) == k) for k in keys}


def _method(scores: list[ScenarioScore], counted: list[ScenarioScore], method: str,
            healthy_h: float) -> dict[str, Any]:
    ms = [s.methods[method] for s in counted]
    faults: list[FaultScore] = [f for m in ms for f in m.observable]
    per_type = {t.value: _f1(ms, t.value) for t in FaultType}
    ttd = [f.ttd_s for f in faults if f.ttd_s is not None]
    multi = [s for s in counted if len(s.methods[method].observable) > 1]
    false_total = sum(s.methods[method].false_incidents for s in scores)
    return {
        "top1": share(m.all_top1 for m in ms), "top3": share(m.all_top3 for m in ms),
        "faults_top1": share(f.top1 for f in faults),
        "faults_top3": share(f.top3 for f in faults),
        "multi_all_named": share(s.methods[method].all_top1 for s in multi),
        "during_flap_named": share(f.top1 for s in counted if s.during_flap
                                   for f in s.methods[method].observable
                                   if f.fault_type != FaultType.LINK_FLAP.value),
        "macro_f1": (float(np.mean(f1s)) if (f1s := [v["f1"] for v in per_type.values()
                                                      if v["n"]]) else None),
        "per_type": per_type,
        "by_shape": _grouped(counted, method, lambda s: s.shape),
        "by_family": _grouped(counted, method, lambda s: s.family),
        "extra_roots": sum(len(m.extra) for m in ms),
        "false_total": false_total,
        "false_per_hour": false_total / max(healthy_h, 1e-9),
        "ttd_median_s": float(np.median(ttd)) if ttd else None,
        "ttd_p90_s": float(np.percentile(ttd, 90)) if ttd else None,
        "located": len(ttd),
    }


def summary(scores: list[ScenarioScore], *, setup: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    """Per method: accuracy with intervals, per-type F1, per shape/family, false
    diagnoses, latency; the model's reliability table."""
    faulty = [s for s in scores if not s.healthy]
    counted = [s for s in faulty if s.counted]
    healthy_h = sum(s.healthy_s for s in scores) / 3600.0
    faults = [f for s in faulty for f in s.methods["model"].faults]
    result: dict[str, Any] = {
        "setup": setup or {}, "scenarios": len(faulty), "counted": len(counted),
        "faults": len(faults), "unobservable": sum(1 for f in faults if not f.observable),
        "unobservable_by_type": {t: sum(1 for f in faults if not f.observable
                                        and f.fault_type == t)
                                 for t in sorted({f.fault_type for f in faults})},
        "healthy_runs": sum(1 for s in scores if s.healthy),
        "healthy_hours": round(healthy_h, 3),
        "soaks": [{"shape": s.shape, "hours": round(s.healthy_s / 3600.0, 3),
                   "false": s.methods["model"].false_incidents}
                  for s in scores if s.healthy],
        "shapes": sorted({s.shape for s in faulty}), "methods": {},
    }
    for method in METHODS:
        result["methods"][method] = _method(scores, counted, method, healthy_h)
    result["reliability"] = reliability([p for s in counted
                                         for p in s.methods["model"].calibration])
    return result
