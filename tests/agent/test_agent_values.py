"""The agent's frames carry exactly what the NIC's files say (mlx5 and bnxt_re trees)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.agent.config import AgentConfig
from fabricops.agent.service import HostAgent
from fabricops.core.frame import Frame, Source
from fabricops.core.topology import Link, Node, NodeRole, Port, Topology
from tests.agent.conftest import FIXTURES, ListSink

MLX5 = FIXTURES / "mlx5"
BNXT = FIXTURES / "bnxt_re"


def number(root: Path, rel: str) -> int:
    return int((root / rel).read_text())


def ethtool(root: Path, ifname: str) -> dict[str, int]:
    lines = (root / "ethtool" / ifname / "statistics").read_text().splitlines()[1:]
    return {k.strip(): int(v) for k, v in (ln.rsplit(":", 1) for ln in lines)}


def samples(frame: Frame) -> dict[tuple[str, str], int | float]:
    return {(s["entity"], s["metric"]): s["value"] for s in frame.to_json_dict()["samples"]}


def agent(root: Path, **kw: object) -> tuple[HostAgent, ListSink, CollectorRegistry]:
    sink, registry = ListSink(), CollectorRegistry()
    config = AgentConfig.model_validate({"root": root, "host": "gpu-7", **kw})
    return HostAgent(config, sink, registry), sink, registry


def test_mlx5_frame_equals_the_files() -> None:
    a, sink, _ = agent(MLX5)
    a.start()
    a.stop()
    frame = sink.frames[0]
    assert (frame.device, frame.source, frame.seq) == ("gpu-7", Source.HOST, 1)
    got = samples(frame)
    for k, (dev, ifn) in enumerate((("mlx5_0", "ens1f0np0"), ("mlx5_1", "ens2f0np0"))):
        nic = f"gpu-7:nic{k}"
        hw = f"sys/class/infiniband/{dev}/ports/1/hw_counters"
        ib = f"sys/class/infiniband/{dev}/ports/1/counters"
        s = ethtool(MLX5, ifn)
        want = {
            "cnp_sent": number(MLX5, f"{hw}/np_cnp_sent"),
            "cnp_handled": number(MLX5, f"{hw}/rp_cnp_handled"),
            "out_of_sequence": number(MLX5, f"{hw}/out_of_sequence"),
            "rdma_retransmits": number(MLX5, f"{hw}/packet_seq_err")
            + number(MLX5, f"{hw}/local_ack_timeout_err"),
            "in_octets": s["rx_bytes_phy"], "out_octets": s["tx_bytes_phy"],
            "in_pkts": s["rx_packets_phy"], "out_pkts": s["tx_packets_phy"],
            "in_fcs_errors": s["rx_crc_errors_phy"], "in_discards": s["rx_discards_phy"],
            "out_discards": s["tx_discards_phy"],
            "in_errors": number(MLX5, f"{ib}/port_rcv_errors"),
            "carrier_transitions": number(MLX5, f"sys/class/net/{ifn}/carrier_changes"),
            **{f"pfc_rx_pause{{prio={p}}}": s[f"rx_prio{p}_pause"] for p in range(8)},
            **{f"pfc_tx_pause{{prio={p}}}": s[f"tx_prio{p}_pause"] for p in range(8)},
        }
        for metric, value in want.items():
            assert got[(nic, metric)] == value, metric
    assert got[("gpu-7:nic0", "oper_status")] == 1  # operstate "up"
    assert got[("gpu-7:nic1", "oper_status")] == 2  # operstate "down"
    assert got[("gpu-7:nic0", "temperature_c")] == 47.25
    assert got[("gpu-7:nic0", "rx_power_dbm")] == -2.0  # the weaker lane
    assert got[("gpu-7:nic0", "tx_power_dbm")] == 0.0
    assert got[("gpu-7:nic1", "rx_power_dbm")] == -60.0  # a dark receiver


def test_mlx5_extras_and_names_are_on_the_agents_metrics() -> None:
    a, _, registry = agent(MLX5)
    a.discover()
    a.collect(ts_ns=1)
    s = ethtool(MLX5, "ens1f0np0")
    dur = registry.get_sample_value(
        "fabricops_agent_nic_extra_total",
        {"port": "gpu-7:nic0", "counter": "rx_pause_duration_us{prio=3}"})
    assert dur == s["rx_prio3_pause_duration"]
    ecn = registry.get_sample_value(
        "fabricops_agent_nic_extra_total",
        {"port": "gpu-7:nic0", "counter": "ecn_marked_roce_packets_received"})
    assert ecn == number(MLX5, "sys/class/infiniband/mlx5_0/ports/1/hw_counters/"
                               "np_ecn_marked_roce_packets")
    info = registry.get_sample_value("fabricops_agent_nic_info", {
        "port": "gpu-7:nic0", "rdma_device": "mlx5_0/1", "netdev": "ens1f0np0",
        "switch_port": "leaf-0-1:Ethernet12", "named_by": "order"})
    assert info == 1.0
    assert registry.get_sample_value("fabricops_agent_read_problems_total",
                                     {"reason": "garbage"}) == 0


def test_bnxt_re_frame_equals_the_files() -> None:
    a, _, _ = agent(BNXT, optics=False)
    a.discover()
    got = samples(a.sample(ts_ns=1))
    for k, (dev, ifn) in enumerate((("bnxt_re0", "ens3f0np0"), ("bnxt_re1", "ens3f1np1"))):
        nic = f"gpu-7:nic{k}"
        hw = f"sys/class/infiniband/{dev}/hw_counters"  # on the device, not the port
        ib = f"sys/class/infiniband/{dev}/ports/1/counters"
        s = ethtool(BNXT, ifn)
        want = {
            "cnp_sent": number(BNXT, f"{hw}/tx_cnp_pkts"),
            "cnp_handled": number(BNXT, f"{hw}/rx_cnp_pkts"),
            "out_of_sequence": number(BNXT, f"{hw}/res_oos_drop_count"),
            "rdma_retransmits": number(BNXT, f"{hw}/seq_err_naks_rcvd")
            + number(BNXT, f"{hw}/to_retransmits"),
            "in_octets": 4 * number(BNXT, f"{ib}/port_rcv_data"),
            "out_octets": 4 * number(BNXT, f"{ib}/port_xmit_data"),
            "in_pkts": s["rx_good_frames"], "out_pkts": s["tx_good_frames"],
            "in_fcs_errors": s["rx_fcs_err_frames"],
            **{f"pfc_rx_pause{{prio={p}}}": s[f"rx_pfc_ena_frames_pri{p}"] for p in range(8)},
            **{f"pfc_tx_pause{{prio={p}}}": s[f"tx_pfc_ena_frames_pri{p}"] for p in range(8)},
        }
        for metric, value in want.items():
            assert got[(nic, metric)] == value, metric


def test_lldp_and_the_topology_name_each_nic_by_its_cable() -> None:
    speed = 400_000_000_000
    topo = Topology(nodes=[
        Node(id="gpu-7", role=NodeRole.HOST, ports=[Port(name="nic5", speed_bps=speed),
                                                    Port(name="nic6", speed_bps=speed)]),
        Node(id="leaf-0-1", role=NodeRole.LEAF, ports=[Port(name="Ethernet12", speed_bps=speed)]),
        Node(id="leaf-1-1", role=NodeRole.LEAF, ports=[Port(name="Ethernet12", speed_bps=speed)]),
    ], links=[Link(a="gpu-7:nic6", b="leaf-0-1:Ethernet12"),
              Link(a="gpu-7:nic5", b="leaf-1-1:Ethernet12")])
    a, _, _ = agent(MLX5)
    a.topology = topo
    plans = a.discover()
    assert [(p.nic.rdma.device, p.nic.entity, p.nic.named_by) for p in plans] == [
        ("mlx5_0", "gpu-7:nic6", "lldp"), ("mlx5_1", "gpu-7:nic5", "lldp")]


def test_explicit_names_win() -> None:
    a, _, _ = agent(MLX5, nics={"mlx5_1": "nic7", "ens1f0np0": "gpu-7:nic2"})
    assert [p.nic.entity for p in a.discover()] == ["gpu-7:nic2", "gpu-7:nic7"]


@pytest.mark.parametrize("interval", [0.0, -1.0])
def test_config_is_strict(interval: float) -> None:
    with pytest.raises(ValueError, match="interval_s"):
        AgentConfig.model_validate({"interval_s": interval})
    with pytest.raises(ValueError, match="extra"):
        AgentConfig.model_validate({"intervall_s": 1.0})
