"""A link is named for a degrading optic only once its receive power has fallen."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import numpy as np

from fabricops.rca.engine import RcaConfig, RcaEngine
from fabricops.rca.model import CLASSES
from fabricops.rca.signals import PortSignals
from fabricops.simulator.builders import fat_tree


def test_an_optic_guess_on_readings_within_their_noise_is_no_root() -> None:
    engine = RcaEngine(fat_tree(k=4), None, RcaConfig(optic_min_drop_db=0.1))
    ends = engine.index.link_ports
    root = np.full(len(engine.candidates.names), 0.9)
    best = np.zeros(len(root), np.int64)
    best[[0, 1]] = CLASSES.index("optic_degradation")
    best[2] = CLASSES.index("gray_loss")
    drop = np.zeros(engine.index.n_ports)
    drop[ends[0, 0]] = 0.05  # link 0: a few hundredths, as readings wander
    drop[ends[1, 1]] = 0.4  # link 1: one end well below its baseline
    drop[ends[2, 0]] = 0.0  # link 2: another fault type, no optic reading needed
    sig = cast(PortSignals, SimpleNamespace(rx_drop_db=drop))
    scored = engine._plausible(root, best, sig)
    assert scored[0] == 0.0, "no link is drained for noise"
    assert scored[1] == 0.9
    assert scored[2] == 0.9
    assert root[0] == 0.9, "the caller's scores are left as they were"
