"""When a node counts as missing: after its own usual silence, not a fixed one."""

from __future__ import annotations

from fabricops.core.frame import Frame, Source
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
