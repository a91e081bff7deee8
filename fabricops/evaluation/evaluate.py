"""Evaluate the RCA on held-out scenarios, beside two baselines measured in the same run.

``run`` replays scenarios ``first .. first + n - 1`` of the seed stream
``seed`` drawn by a ``ScenarioSpec`` (by default the held-out shapes, which
no training scenario uses), plus ``soak_runs`` fault-free soaks of ``soak_s``
seconds (one family after the other), in ``workers`` processes. Each goes
simulator -> bus -> RCA; the RCA sees telemetry only. ``scoring`` scores each scenario and
``summary`` aggregates them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fabricops.evaluation.replay import map_scenarios, replay
from fabricops.evaluation.scenarios import EVAL_SEED, ScenarioSpec, make
from fabricops.evaluation.scoring import ScenarioScore, score
from fabricops.evaluation.summary import summary
from fabricops.rca.model import RcaModel

Progress = Callable[[int, int], None]
SOAK_INDEX = 1_000_000  # soaks draw from indices no faulty scenario uses

__all__ = ["run", "summary"]


def _one(args: tuple[int, int, str | None, ScenarioSpec]) -> ScenarioScore:
    index, seed, model_path, spec = args
    model = RcaModel.load(model_path) if model_path else None
    ls = make(index, seed, spec)
    return score(replay(ls, model), during_flap=spec.during_flap)


def soak_specs(spec: ScenarioSpec, runs: int, soak_s: float) -> list[ScenarioSpec]:
    """What each of ``runs`` soaks draws: soak i on family i (mod the families that
    have a shape), so that three soaks cover three families."""
    soak = spec.model_copy(update={"soak_s": soak_s, "during_flap": False})
    fams = [f for f in spec.families if any(s[0] == f for s in soak.shapes())]
    if not fams:
        return [soak] * runs
    return [soak.model_copy(update={"families": (fams[i % len(fams)],)}) for i in range(runs)]


def run(model_path: str | Path | None, n: int, *, spec: ScenarioSpec | None = None,
        first: int = 0, seed: int = EVAL_SEED, soak_runs: int = 4, soak_s: float = 900.0,
        workers: int = 2, progress: Progress | None = None) -> list[ScenarioScore]:
    """Score ``n`` faulty scenarios and ``soak_runs`` fault-free soaks."""
    spec = spec or ScenarioSpec()
    path = str(model_path) if model_path else None
    jobs = [(SOAK_INDEX + i, seed, path, s)
            for i, s in enumerate(soak_specs(spec, soak_runs, soak_s))]
    jobs += [(first + i, seed, path, spec) for i in range(n)]
    return list(map_scenarios(_one, jobs, workers=workers, progress=progress))
