"""The RCA's view of the fabric (rates from frames) and its model file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from fabricops.core.frame import Frame, Source
from fabricops.rca.features import FEATURES
from fabricops.rca.model import CLASSES, DEFAULT_MODEL, ModelError, RcaModel
from fabricops.rca.view import COL, FabricView, PortIndex, Snapshot
from fabricops.simulator.builders import fat_tree, leaf_spine

T0 = 1_767_225_600_000_000_000


def frame(device: str, port: str, ts_s: float, octets: int, oper: int = 1) -> Frame:
    return Frame.build(device, T0 + int(ts_s * 1e9), Source.GNMI, 1, [port, port],
                       ["in_octets", "oper_status"], [octets, oper])


@pytest.fixture
def view() -> FabricView:
    return FabricView(PortIndex(fat_tree(k=4)), stale_s=3.5)


def test_rates_come_from_consecutive_samples_of_each_port(view: FabricView) -> None:
    view.ingest([frame("leaf-0-0", "leaf-0-0:eth1", 0, 1000),
                 frame("leaf-0-0", "leaf-0-0:eth1", 2, 5000)])
    snap = view.snapshot()
    p = view.index.port_of["leaf-0-0:eth1"]
    assert snap.values[p, COL["in_octets"]] == pytest.approx(2000.0)
    assert snap.values[p, COL["oper_status"]] == 1.0


def test_a_reset_counter_leaves_the_rate_unknown_then_recovers(view: FabricView) -> None:
    p = view.index.port_of["leaf-0-0:eth1"]
    view.ingest([frame("leaf-0-0", "leaf-0-0:eth1", 0, 10_000),
                 frame("leaf-0-0", "leaf-0-0:eth1", 1, 10)])
    assert np.isnan(view.snapshot().values[p, COL["in_octets"]])
    view.ingest([frame("leaf-0-0", "leaf-0-0:eth1", 2, 110)])
    assert view.snapshot().values[p, COL["in_octets"]] == pytest.approx(100.0)


def test_a_port_silent_past_stale_s_is_missing_not_zero(view: FabricView) -> None:
    p = view.index.port_of["leaf-0-0:eth1"]
    view.ingest([frame("leaf-0-0", "leaf-0-0:eth1", 0, 0), frame("leaf-0-0", "leaf-0-0:eth1",
                                                                1, 10)])
    later = view.snapshot(T0 + int(6e9))
    assert not later.port_fresh[p]
    assert np.isnan(later.values[p]).all()


def test_frames_of_unknown_devices_are_counted_not_fatal(view: FabricView) -> None:
    view.ingest([frame("leaf-9-9", "leaf-9-9:eth1", 0, 1)])
    assert view.samples_unknown == 2
    assert view.frames_seen == 0


def _tiny_model() -> RcaModel:
    rng = np.random.default_rng(0)
    x = rng.random((300, len(FEATURES)))
    y = (x[:, 3] > 0.5).astype(np.int64) * CLASSES.index("gray_loss")
    return RcaModel.fit(x, y, trained={"scenarios": 0})


def test_a_saved_model_loads_without_retraining_and_scores_the_same(tmp_path: Path) -> None:
    model = _tiny_model()
    path = model.save(tmp_path / "m.rcamodel")
    again = RcaModel.load(path)
    assert again.version == model.version
    x = np.random.default_rng(1).random((20, len(FEATURES)))
    kind = np.zeros(20, np.int8)
    np.testing.assert_array_equal(again.scores(x, kind)[0], model.scores(x, kind)[0])


def test_scoring_runs_on_one_openmp_thread_and_leaves_the_process_setting_alone() -> None:
    """OpenMP's idle threads spin: on busy cores the default costs many times the CPU."""
    def openmp_threads() -> set[int]:
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "openmp"}

    model = RcaModel.load(DEFAULT_MODEL)
    seen: list[set[int]] = []
    real = model.estimator.predict_proba

    def predict_proba(x: np.ndarray) -> np.ndarray:
        seen.append(openmp_threads())
        return real(x)

    model.estimator.predict_proba = predict_proba
    with threadpool_limits(limits=2, user_api="openmp"):
        model.class_probs(np.random.default_rng(1).random((20, len(FEATURES))))
        after = openmp_threads()
    assert seen == [{1}]
    assert after == {2}


def test_a_file_that_is_not_a_model_is_refused_with_its_name(tmp_path: Path) -> None:
    bad = tmp_path / "junk.rcamodel"
    bad.write_bytes(b"\x00\x00\x00\x02{}garbage")
    with pytest.raises(ModelError, match=r"junk\.rcamodel"):
        RcaModel.load(bad)
    with pytest.raises(ModelError, match="cannot read"):
        RcaModel.load(tmp_path / "absent.rcamodel")


def test_a_model_of_another_format_version_is_refused(tmp_path: Path) -> None:
    path = _tiny_model().save(tmp_path / "m.rcamodel")
    data = path.read_bytes()
    n = int.from_bytes(data[:4], "big")
    header = data[4:4 + n].replace(b'"format_version": 1', b'"format_version": 99')
    path.write_bytes(len(header).to_bytes(4, "big") + header + data[4 + n:])
    with pytest.raises(ModelError, match="format version 99"):
        RcaModel.load(path)


def test_a_failover_to_another_source_does_not_rate_across_sources() -> None:
    """SNMP and gNMI counters of one port are not comparable: after a failover the
    first sample of the new source starts the rates again instead of making one."""
    topo = leaf_spine(gpus=16, nics_per_host=4, leaf_radix=8, spine_radix=8)
    view = FabricView(PortIndex(topo), stale_s=2.0)
    port = "leaf-0:eth1"
    s = 10**9

    def sample(ts_s: float, octets: int, source: str) -> Frame:
        return Frame.build("leaf-0", int(ts_s * s), source, 0, [port], ["out_octets"],
                           [octets])

    view.ingest([sample(0, 1_000, "gnmi"), sample(1, 2_000, "gnmi")])
    assert view.snapshot().col("out_octets")[view.index.port_of[port]] == 1_000.0
    view.ingest([sample(4, 9_000_000, "snmp")])  # gNMI silent past stale_s: failover
    assert np.isnan(view.snapshot().col("out_octets")[view.index.port_of[port]])
    view.ingest([sample(5, 9_000_500, "snmp")])
    assert view.snapshot().col("out_octets")[view.index.port_of[port]] == 500.0


def test_roots_on_the_same_nodes_are_one_incident_and_others_are_new() -> None:
    from fabricops.rca.engine import related
    assert related("host-020:nic5", "host-020:nic5~leaf-5:eth6")
    assert related("spine-6", "leaf-1:eth50~spine-6:eth2")
    assert not related("host-020:nic5", "host-034:nic4")
    assert not related("leaf-1:eth50~spine-4:eth6", "leaf-2:eth40~spine-1:eth12")


def _moves_after(change: str) -> tuple[np.ndarray, PortIndex, int]:
    """Moves per node the RCA counts from INT reports, after ``change`` on a busy fabric."""
    from fabricops.core.faults import FaultType
    from fabricops.rca.flow_paths import IntPaths
    from fabricops.rca.signals import Signals
    from fabricops.simulator.agents.int_exporter import IntExporter, IntExporterConfig, ListSender
    from fabricops.simulator.engine import SimConfig, Simulator
    from fabricops.simulator.faults import FaultSpec
    from fabricops.simulator.workload import JobSpec

    topo = leaf_spine(gpus=64)
    sim = Simulator(topo, SimConfig(seed=3))
    sim.add_job(JobSpec(hosts=sum(1 for _ in topo.hosts()), placement="random",
                        compute_s=0.0, comm_bytes_per_nic=1e15))
    ix = PortIndex(topo)
    paths = IntPaths(ix)
    exporter = IntExporter(IntExporterConfig(sample_flows_per_tick=0), sim, ListSender())
    sim.step()
    paths.ingest(exporter.build_batch(sim))
    leaf = "leaf-1"
    if change == "polarize":
        sim.add_fault(FaultSpec(type=FaultType.HASH_POLARIZATION, entity=leaf,
                                start_s=sim.time_s))
    else:  # one of the leaf's uplinks goes down
        sim.control.shut_port(next(p for p in ix.port_ids if p.startswith(f"{leaf}:")
                                   and ix.port_of[p] in np.flatnonzero(Signals(ix).uplink)))
    for _ in range(3):
        sim.step()
        paths.ingest(exporter.build_batch(sim))
    down = (ix.port_link >= 0) & ~sim.oper_up[np.maximum(ix.port_link, 0)]
    assert down.any() == (change == "shut")
    unstable = np.bincount(ix.port_node[down], minlength=ix.n_nodes) > 0
    moved = paths.moves(sim.ts_ns, Signals(ix).uplink, unstable)
    return moved, ix, ix.node_ids.index(leaf)


def test_flows_rehashed_between_healthy_uplinks_are_counted_as_moves() -> None:
    moved, _, leaf = _moves_after("polarize")
    assert moved[leaf] >= 2
    assert moved.sum() == moved[leaf]  # nothing moved anywhere else


def test_flows_rehashed_because_an_uplink_went_down_are_not_moves() -> None:
    moved, _, leaf = _moves_after("shut")
    assert moved[leaf] == 0


def test_only_candidates_in_focus_are_scored() -> None:
    model = RcaModel.load(DEFAULT_MODEL)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, size=(6, len(FEATURES)))
    kind = np.array([0, 0, 1, 1, 2, 2], np.int8)
    focus = np.array([True, False, True, False, True, False])
    full, _ = model.scores(x, kind)
    part, _ = model.scores(x, kind, focus)
    assert np.array_equal(part[focus], full[focus])
    assert (part[~focus] == 0).all()



def test_moves_are_excused_only_around_a_link_that_changes_state() -> None:
    """A flapping link re-hashes the groups around it, not the whole fabric: flows that
    move elsewhere still count (so a hash fault is still seen while a link flaps)."""
    from fabricops.rca.signals import Signals, unstable_nodes

    ix = PortIndex(leaf_spine(gpus=64))
    values = np.full((ix.n_ports, len(COL)), np.nan)
    values[:, COL["oper_status"]] = 1.0
    fresh = np.ones(ix.n_ports, bool)
    sig = Signals(ix).update(Snapshot(T0, values, fresh, np.ones(ix.n_nodes, bool), fresh))
    assert not unstable_nodes(ix, sig).any()  # a quiet fabric: moves count everywhere

    port = ix.port_of["leaf-1:eth1"]
    down = sig.oper_down.copy()
    down[port] = True
    shaky = unstable_nodes(ix, replace(sig, oper_down=down))
    ends = {ix.node_ids[n] for n in np.flatnonzero(shaky)}
    assert ends == {"leaf-1", ix.port_ids[ix.peer[port]].split(":")[0]}

    flapping = next(p for p, name in enumerate(ix.port_ids) if name.startswith("spine-0:"))
    flaps = sig.flaps.copy()
    flaps[flapping] = 1.0
    shaky = unstable_nodes(ix, replace(sig, flaps=flaps))
    assert {ix.node_ids[n] for n in np.flatnonzero(shaky)} == {
        "spine-0", ix.port_ids[ix.peer[flapping]].split(":")[0]}
