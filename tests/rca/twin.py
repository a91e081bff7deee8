"""The small fabric the RCA service tests run: a k=4 fat-tree (20 switches, 16 hosts)
with one job over every host."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.rca.model import RcaModel
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.workload import JobSpec


def busy_fat_tree() -> Simulator:
    sim = Simulator(fat_tree(k=4), SimConfig(seed=3))
    sim.add_job(JobSpec(hosts=16, placement="random", compute_s=0.3, comm_bytes_per_nic=30e9))
    return sim


def scored_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows the model is asked to score, per call, from now on."""
    rows: list[int] = []
    score = RcaModel.class_probs

    def counted(self: RcaModel, x: np.ndarray) -> np.ndarray:
        rows.append(len(x))
        return score(self, x)

    monkeypatch.setattr(RcaModel, "class_probs", counted)
    return rows
