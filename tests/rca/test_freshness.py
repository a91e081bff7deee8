"""Freshness learnt from a batch of samples is what it learns from them one by one."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricops.rca.freshness import Freshness

SECOND = 1_000_000_000


def state(f: Freshness) -> list[bytes]:
    return [f._last.tobytes(), f._gap.tobytes(), f._lag.tobytes(), f._dev.tobytes()]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.lists(st.tuples(st.integers(0, 5), st.integers(0, 40),
                                             st.integers(-1, 40)), min_size=1, max_size=40),
       st.integers(1, 4))
def test_a_batch_is_the_samples_one_by_one(n_nodes: int, samples: list[tuple[int, int, int]],
                                            batches: int) -> None:
    """Nodes repeat within a batch, samples come out of order, some with no fabric front
    (-1); a batch at a time and a sample at a time leave the same state, bit for bit."""
    one, many = (Freshness(n_nodes, stale_ns=3 * SECOND) for _ in range(2))
    node = np.array([s[0] % n_nodes for s in samples], np.int64)
    ts = np.array([s[1] for s in samples], np.int64) * (SECOND // 4) + 7
    front = np.array([s[2] for s in samples], np.int64) * (SECOND // 3)
    front[front < 0] = -1
    for part in np.array_split(np.arange(len(samples)), batches):
        for i in part.tolist():
            one.observe(int(node[i]), int(ts[i]), int(front[i]))
        many.observe_many(node[part], ts[part], front[part])
        assert state(many) == state(one)


def test_a_node_that_polls_slowly_and_lags_gets_a_longer_limit() -> None:
    f = Freshness(2, stale_ns=3 * SECOND)
    for k in range(1, 40):
        t = k * SECOND
        nodes = np.array([0, 1] if k % 10 == 0 else [0], np.int64)  # node 1 every 10 s
        ts = np.array([t, t - 2 * SECOND][:len(nodes)], np.int64)  # and 2 s behind
        f.observe_many(nodes, ts, np.full(len(nodes), t, np.int64))
    limit = f.limit_ns()
    assert limit[0] == 3 * SECOND
    assert limit[1] > 25 * SECOND + 2 * SECOND
