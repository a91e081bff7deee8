"""An incast is senders beyond those a NIC usually has, not a NIC's steady peers."""

from __future__ import annotations

import numpy as np

from fabricops.rca.detect import detect
from fabricops.rca.engine import RcaEngine
from fabricops.rca.features import PathStats
from fabricops.rca.signals import PortSignals
from fabricops.simulator.builders import fat_tree


def _stats(engine: RcaEngine, fan_in: np.ndarray, usual: np.ndarray | None) -> PathStats:
    nodes = np.zeros(engine.index.n_nodes)
    return PathStats((), nodes, nodes, nodes, fan_in, nodes, usual)


def _flooded(engine: RcaEngine) -> PortSignals:
    """Every port at line rate with a standing queue: only fan-in decides an incast."""
    n = engine.index.n_ports
    signals = engine.signals.update(engine.view.snapshot(0))
    ones, zeros = np.ones(n), np.zeros(n)
    return signals.__class__(**{**signals.__dict__, "util_rx": ones, "rx_sustained": ones,
                                "queue": ones * 1e6, "pause_tx": zeros})


def test_steady_peers_are_no_incast_and_new_senders_are() -> None:
    engine = RcaEngine(fat_tree(k=4), None)
    sig = _flooded(engine)
    n = len(engine.index.nic_ports)
    usual = np.full(n, 3.0)  # ring neighbour, a pipeline peer, a storage flow
    fan_in = usual.copy()
    fan_in[5] = 9.0  # six new senders on one NIC

    def incast(stats: PathStats) -> set[int]:
        return {s.candidate for s in detect(engine.index, engine.candidates, sig, stats)
                if s.fault_type == "incast"}

    assert len(incast(_stats(engine, usual.copy(), None))) == n, "raw counts: all look alike"
    named = incast(_stats(engine, fan_in, usual))
    assert len(named) == 1
    assert engine.candidates.names[named.pop()] == engine.candidates.names[
        engine.candidates.n_links + len(engine.index.switch_nodes) + 5]


def test_the_usual_fan_in_is_learnt_but_not_from_an_incast() -> None:
    engine = RcaEngine(fat_tree(k=4), None)
    n = len(engine.index.nic_ports)
    steady = np.full(n, 2.0)
    for _ in range(engine.config.warmup_steps + 40):
        engine.steps += 1
        engine._usual_fan_in(steady)
    assert np.allclose(engine._usual_fan_in(steady), 2.0)
    burst = steady.copy()
    burst[0] = 10.0
    for _ in range(60):  # a minute of incast: the usual stays what it was
        engine.steps += 1
        usual = engine._usual_fan_in(burst)
    assert usual[0] == 2.0
    drift = steady + 1.0  # a new steady peer everywhere is learnt
    for _ in range(200):
        engine.steps += 1
        usual = engine._usual_fan_in(drift)
    assert np.allclose(usual, 3.0, atol=0.05)
