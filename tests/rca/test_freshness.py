"""When a node counts as missing: after its own usual silence, not a fixed one; and a
batch of samples teaches the same as its samples one by one."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricops.core.frame import Frame, Source
from fabricops.rca.freshness import Freshness
from fabricops.rca.view import FabricView, PortIndex
from fabricops.simulator.builders import fat_tree

S = 10**9
T0 = 1_767_225_600 * S


def frame(device: str, ts_s: float, octets: int = 0) -> Frame:
    port = f"{device}:eth1"
    return Frame.build(device, T0 + int(ts_s * S), Source.GNMI, 1, [port], ["in_octets"],
                       [octets])


def fresh(view: FabricView, device: str, at_s: float) -> bool:
    snap = view.snapshot(T0 + int(at_s * S))
    return bool(snap.node_fresh[view.index.node_of[device]])


def make() -> FabricView:
    return FabricView(PortIndex(fat_tree(k=4)), stale_s=3.5)


def test_nodes_sampled_every_second_together_are_missing_after_stale_s() -> None:
    view = make()
    for t in range(20):
        view.ingest([frame("leaf-0-0", t), frame("leaf-0-1", t)])
    assert fresh(view, "leaf-0-0", 19 + 3.4)
    assert not fresh(view, "leaf-0-0", 19 + 3.6)


def test_a_switch_polled_every_30_s_is_not_missing_between_polls() -> None:
    view = make()
    for t in range(0, 300, 30):
        view.ingest([frame("leaf-0-0", t, t)])
    assert fresh(view, "leaf-0-0", 270 + 29.0)
    assert not fresh(view, "leaf-0-0", 270 + 80.0), "a poller that stopped is missing"


def test_one_poll_of_many_notifications_is_not_taken_for_fast_sampling() -> None:
    view = make()
    for t in range(0, 300, 30):
        view.ingest([frame("leaf-0-0", t + k * 0.001, t) for k in range(20)])
    assert fresh(view, "leaf-0-0", 270 + 29.0)


def test_a_stream_that_arrives_late_is_not_missing_and_is_once_it_stops() -> None:
    """leaf-0-1's samples arrive 5 s after the fabric's newest: a busy collector."""
    view = make()
    for t in range(60):
        view.ingest([frame("leaf-0-0", t)])
        if t >= 5:
            view.ingest([frame("leaf-0-1", t - 5)])
    assert fresh(view, "leaf-0-1", 59)
    assert not fresh(view, "leaf-0-1", 54 + 3.5 + 5 + 4), "silent past stale plus its lag"


def test_one_long_outage_does_not_teach_a_node_to_be_silent() -> None:
    view = make()
    for t in list(range(30)) + list(range(330, 340)):
        view.ingest([frame("leaf-0-0", t)])
    assert not fresh(view, "leaf-0-0", 339 + 6.0)


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
    one, many = (Freshness(n_nodes, stale_ns=3 * S) for _ in range(2))
    node = np.array([s[0] % n_nodes for s in samples], np.int64)
    ts = np.array([s[1] for s in samples], np.int64) * (S // 4) + 7
    front = np.array([s[2] for s in samples], np.int64) * (S // 3)
    front[front < 0] = -1
    for part in np.array_split(np.arange(len(samples)), batches):
        for i in part.tolist():
            one.observe(int(node[i]), int(ts[i]), int(front[i]))
        many.observe_many(node[part], ts[part], front[part])
        assert state(many) == state(one)


def test_a_node_that_polls_slowly_and_lags_gets_a_longer_limit() -> None:
    f = Freshness(2, stale_ns=3 * S)
    for k in range(1, 40):
        t = k * S
        nodes = np.array([0, 1] if k % 10 == 0 else [0], np.int64)  # node 1 every 10 s
        ts = np.array([t, t - 2 * S][:len(nodes)], np.int64)  # and 2 s behind
        f.observe_many(nodes, ts, np.full(len(nodes), t, np.int64))
    limit = f.limit_ns()
    assert limit[0] == 3 * S
    assert limit[1] > 25 * S + 2 * S
