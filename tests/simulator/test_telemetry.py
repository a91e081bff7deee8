"""Frames carry every port and NIC metric of the catalogue; run files keep them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fabricops.core.catalogue import CATALOGUE, Scope
from fabricops.simulator.engine import Simulator
from fabricops.simulator.runfile import RunFileError, RunReader, RunWriter

Make = Callable[..., Simulator]


def _metric_names(frame_metrics: set[int]) -> set[str]:
    return {CATALOGUE.by_id(m).family.name for m in frame_metrics}


def test_frames_carry_every_port_and_nic_metric(streaming: Make) -> None:
    sim = streaming()
    sim.step()
    frames = {f.device: f for f in sim.frames()}
    assert len(frames) == sim.fabric.n_nodes
    port_metrics = {m.family.name for m in CATALOGUE.of_scope(Scope.PORT)} - {
        "tx_bias_ma", "supply_voltage_v"}  # read from real transceivers; the twin has none
    nic_metrics = {m.family.name for m in CATALOGUE.of_scope(Scope.NIC)}
    leaf, host = frames["leaf-0"], frames["host-000"]
    assert _metric_names(set(leaf.metric.tolist())) == port_metrics
    assert _metric_names(set(host.metric.tolist())) == port_metrics | nic_metrics
    assert set(host.entities) == {f"host-000:nic{i}" for i in range(8)}
    assert leaf.unknown_metrics().sum() == 0
    assert leaf.ts_ns == sim.config.start_time_ns + 1_000_000_000


def test_frames_built_unchecked_are_valid_read_only_and_keep_their_values(
        streaming: Make) -> None:
    from fabricops.core.frame import Frame

    sim = streaming()
    sim.step()
    first = sim.frames()
    kept = [f.raw.copy() for f in first]
    for frame in first:  # each as the checked constructor and the bus would take it
        again = Frame(frame.device, frame.ts_ns, frame.source, frame.seq, frame.entities,
                      frame.entity_idx, frame.metric, frame.raw)
        assert Frame.decode(frame.encode()) == again == frame
        with pytest.raises(ValueError, match="read-only"):
            frame.raw[0] = 1
    sim.step()
    sim.frames()  # the next tick's frames do not change the earlier ones
    assert all((f.raw == k).all() for f, k in zip(first, kept, strict=True))


def test_frame_sequence_numbers_advance_per_device(streaming: Make) -> None:
    sim = streaming()
    seqs = []
    for _ in range(3):
        sim.step()
        seqs.append({f.device: f.seq for f in sim.frames()}["spine-0"])
    assert seqs == [1, 2, 3]


def test_run_file_round_trip_and_cut_short(streaming: Make, tmp_path: Path) -> None:
    sim = streaming()
    path = tmp_path / "run.fosrun"
    with RunWriter(path) as writer:
        writer.header({"scenario": {"name": "t"}})
        for _ in range(3):
            sim.step()
            writer.frames(sim.frames())
        writer.truth([])
    reader = RunReader(path)
    ticks = list(reader.ticks())
    assert len(ticks) == 3
    assert [f.encode() for f in ticks[-1]] == [f.encode() for f in sim.frames()]
    assert reader.header()["codec_version"] == 2  # frames are Protocol Buffers records
    cut = tmp_path / "cut.fosrun"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    read: list[int] = []

    def read_all() -> None:
        read.extend(len(frames) for frames in RunReader(cut).ticks())

    with pytest.raises(RunFileError, match=r"cut\.fosrun: cut short at byte \d+"):
        read_all()
    assert read, "whole records before the cut are still read"
    bad = tmp_path / "bad.fosrun"
    bad.write_bytes(b"not a run file")
    with pytest.raises(RunFileError, match="bad magic"):
        RunReader(bad).header()


def test_frames_of_a_fabric_whose_hosts_and_switches_interleave_carry_their_own_ports() -> None:
    """Node order is the topology's: with hosts between switches, each frame still holds
    its own ports' values (the twin cuts switch and host frames from two matrices)."""
    from fabricops.core.topology import Topology
    from fabricops.simulator.builders import leaf_spine
    from fabricops.simulator.engine import SimConfig
    from fabricops.simulator.workload import JobSpec

    base = leaf_spine(gpus=32, nics_per_host=4, leaf_radix=8, spine_radix=8)
    hosts = [n for n in base.nodes if n.is_host]
    switches = [n for n in base.nodes if not n.is_host]
    mixed = [n for pair in zip(switches, hosts, strict=False) for n in pair]
    mixed += hosts[len(switches):] + switches[len(hosts):]
    topo = Topology(nodes=tuple(mixed), links=base.links)
    sim = Simulator(topo, SimConfig(seed=2))
    sim.add_job(JobSpec(hosts=len(hosts), placement="random", compute_s=0.2,
                        comm_bytes_per_nic=1e9))
    for _ in range(3):
        sim.step()
    fab, tel = sim.fabric, sim.telemetry
    octets = CATALOGUE.id_of("out_octets")
    cnp = CATALOGUE.id_of("cnp_sent")
    checked = 0
    for frame in sim.frames():
        for i in range(frame.n_samples):
            port = fab.port_index(frame.entities[frame.entity_idx[i]])
            if frame.metric[i] == octets:
                assert frame.raw[i] == tel.counter("out_octets")[port]
                checked += 1
            elif frame.metric[i] == cnp:
                nic = int(fab.port_nic[port])
                assert frame.raw[i] == tel.nic_counters[0][nic]
                checked += 1
    assert checked == fab.n_ports + fab.n_nics
    assert tel.counter("out_octets").any(), "the job must move traffic for this to mean much"


def test_a_tick_cut_whole_gives_each_node_the_frame_it_gets_alone(streaming: Make) -> None:
    import numpy as np

    sim = streaming()
    sim.step()
    tel, n = sim.telemetry, sim.fabric.n_nodes
    whole = tel.frames(7, np.ones(n, bool))  # every node reporting: cut in runs of rows
    for quiet in (0, n // 2, n - 1):  # one node not reporting: cut node by node
        reporting = np.ones(n, bool)
        reporting[quiet] = False
        alone = tel.frames(7, reporting)
        assert [f.encode() for f in alone] == [
            f.encode() for i, f in enumerate(whole) if i != quiet]
    assert len({len(f.raw) for f in whole}) > 1  # nodes of several sizes
