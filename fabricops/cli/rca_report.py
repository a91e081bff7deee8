"""Tables of ``fabricops rca eval``: methods side by side, per fault type, per shape, reliability.

Each share prints as ``97.5% [93.1-99.2] n=120``: the rate, its 95 % Wilson
interval and the count it rests on.
"""

from __future__ import annotations

from typing import Any, Final

from rich.table import Table

NAMES: Final = {"model": "fabricops RCA", "rules": "rules alone", "votes": "path voting alone"}
# (key, goal, higher is better)
TARGETS: Final = {"top1": (0.97, True), "top3": (0.99, True), "macro_f1": (0.95, True),
                  "multi_all_named": (0.95, True), "during_flap_named": (0.95, True),
                  "false_total": (0, False), "ttd_median_s": (2.0, False),
                  "ttd_p90_s": (3.0, False)}


def rate(s: dict[str, Any] | None, *, ci: bool = True) -> str:
    if not s or s.get("rate") is None:
        return "-"
    text = f"{100 * s['rate']:.1f}%"
    if ci:
        text += f" [{100 * s['low']:.0f}-{100 * s['high']:.0f}]"
    return f"{text} n={s['n']}"


def _num(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def methods_table(summary: dict[str, Any]) -> Table:
    methods = summary["methods"]
    table = Table(title=(
        f"RCA evaluation: {summary['scenarios']} faulty scenarios ({summary['counted']} with an "
        f"observable fault), {summary['faults']} faults ({summary['unobservable']} "
        f"unobservable, not scored), {summary['healthy_runs']} soaks "
        f"({summary['healthy_hours']:.2f} h fault-free in all)"))
    table.add_column("metric")
    for name in methods:
        table.add_column(NAMES[name], justify="right")
    table.add_column("target", justify="right")
    rows = [("every root named (top-1)", "top1", ">= 97%"),
            ("every root in top-3", "top3", ">= 99%"),
            ("faults named (top-1)", "faults_top1", ""),
            ("faults in top-3", "faults_top3", ""),
            ("2+ faults: all named", "multi_all_named", ">= 95%"),
            ("fault during a flap named", "during_flap_named", ">= 95%")]
    for label, key, target in rows:
        table.add_row(label, *(rate(m[key]) for m in methods.values()), target)
    plain = [("fault-type macro-F1", "macro_f1", ">= 0.95"),
             ("extra roots (name no fault)", "extra_roots", ""),
             ("false incidents (fault-free)", "false_total", "0"),
             ("median onset -> diagnosis (s)", "ttd_median_s", "<= 2"),
             ("p90 onset -> diagnosis (s)", "ttd_p90_s", "<= 3")]
    for label, key, target in plain:
        table.add_row(label, *(_num(m[key]) for m in methods.values()), target)
    return table


def types_table(summary: dict[str, Any]) -> Table:
    m = summary["methods"]["model"]
    table = Table(title="per fault type (fabricops RCA)")
    for col in ("fault type", "named", "precision", "recall", "F1", "unobservable"):
        table.add_column(col, justify="left" if col == "fault type" else "right")
    unobs = summary.get("unobservable_by_type", {})
    for t, v in m["per_type"].items():
        if v["n"] or unobs.get(t):
            table.add_row(t, rate(v["named"]), _num(v["precision"]), _num(v["recall"]),
                          _num(v["f1"]), str(unobs.get(t, 0)))
    return table


def shapes_table(summary: dict[str, Any]) -> Table:
    table = Table(title="every root named, per fabric shape and family")
    table.add_column("shape")
    for name in summary["methods"]:
        table.add_column(NAMES[name], justify="right")
    model = summary["methods"]["model"]
    for group in ("by_family", "by_shape"):
        for key in model[group]:
            table.add_row(key, *(rate(m[group].get(key)) for m in summary["methods"].values()))
    return table


def soaks_table(summary: dict[str, Any]) -> Table | None:
    """One row per fault-free soak (jobs start and stop during each); None without soaks."""
    soaks = summary.get("soaks") or []
    if not soaks:
        return None
    table = Table(title="fault-free soaks, workload changing (fabricops RCA)")
    for col in ("shape", "hours", "false incidents"):
        table.add_column(col, justify="left" if col == "shape" else "right")
    for row in soaks:
        table.add_row(row["shape"], f"{row['hours']:.2f}", str(row["false"]))
    return table


def reliability_table(summary: dict[str, Any]) -> Table:
    table = Table(title="reliability: final diagnoses by confidence (fabricops RCA)")
    for col in ("confidence", "diagnoses", "mean confidence", "root right"):
        table.add_column(col, justify="right")
    for row in summary["reliability"]:
        table.add_row(row["bin"], str(row["n"]), _num(row["confidence"]),
                      rate(row["right"], ci=False))
    return table


def targets_met(summary: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(met, missed) target keys for the model; a target with no cases is neither."""
    m = summary["methods"]["model"]
    met: list[str] = []
    missed: list[str] = []
    for key, (goal, higher) in TARGETS.items():
        v = m[key]
        v = v.get("rate") if isinstance(v, dict) else v
        if v is None:
            continue
        (met if (v >= goal if higher else v <= goal) else missed).append(key)
    return met, missed
