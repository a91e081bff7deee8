"""Train the RCA model on labelled simulator scenarios.

``train(n, ...)`` replays ``n`` scenarios of the training seed stream on the
training shapes only (in ``workers`` processes), keeps candidate rows (the true
roots, every entity a rule flagged, the loudest entities and a random sample),
and fits the model. The mix (``spec_for``): one fault in most scenarios, two
or three concurrent faults, faults while a link flaps, and healthy runs. A
root is labelled only once its fault has reached traffic. Positive rows are
weighted up so that the rare roots count as much as the many healthy entities
around them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from fabricops.evaluation.replay import map_scenarios, replay
from fabricops.evaluation.scenarios import TRAIN_SEED, ScenarioSpec, make
from fabricops.rca.model import CLASSES, RcaModel

F64 = npt.NDArray[np.float64]
Progress = Callable[[int, int], None]


def spec_for(index: int) -> ScenarioSpec:
    """The training mix: of every 20 scenarios, 1 healthy, 4 with two faults, 1 with
    three, 3 with faults during a flap, the rest with one fault."""
    slot = index % 20
    if slot == 0:
        return ScenarioSpec(split="train", faults=0)
    if slot <= 4:
        return ScenarioSpec(split="train", faults=2)
    if slot == 5:
        return ScenarioSpec(split="train", faults=3)
    if slot <= 8:
        return ScenarioSpec(split="train", faults=2, during_flap=True)
    return ScenarioSpec(split="train", faults=1)


def _rows(args: tuple[int, int]) -> tuple[F64, npt.NDArray[np.int64]]:
    index, seed = args
    r = replay(make(index, seed, spec_for(index)), None, collect=True)
    if not r.rows:
        return np.zeros((0, 0)), np.zeros(0, np.int64)
    return np.vstack(r.rows), np.concatenate(r.labels)


def collect(n: int, *, seed: int = TRAIN_SEED, workers: int = 2,
            progress: Progress | None = None) -> tuple[F64, npt.NDArray[np.int64]]:
    """Feature rows and labels of ``n`` training scenarios."""
    xs, ys = [], []
    jobs = [(i, seed) for i in range(n)]
    for x, y in map_scenarios(_rows, jobs, workers=workers, progress=progress):
        if len(x):
            xs.append(x)
            ys.append(y)
    return np.vstack(xs), np.concatenate(ys)


def train(n: int, *, seed: int = TRAIN_SEED, workers: int = 2,
          progress: Progress | None = None) -> RcaModel:
    """Replay ``n`` training scenarios and fit a model on them."""
    t0 = time.perf_counter()
    x, y = collect(n, seed=seed, workers=workers, progress=progress)
    counts = np.bincount(y, minlength=len(CLASSES))
    weight = np.where(y > 0, np.maximum(1.0, counts[0] / np.maximum(counts[y], 1) / 20.0), 1.0)
    model = RcaModel.fit(x, y, weight=weight, seed=seed, trained={
        "scenarios": n, "seed": seed,
        "rows_per_class": {CLASSES[i]: int(c) for i, c in enumerate(counts) if c},
        "seconds": 0.0,
    })
    model.trained["seconds"] = round(time.perf_counter() - t0, 1)
    return model
