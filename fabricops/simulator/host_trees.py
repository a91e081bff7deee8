"""Per-host NIC trees: what a host agent would find on each simulated GPU server.

``HostTreeWriter(sim, out)`` writes, for every host, a directory ``out/<host>``
shaped like the part of a Linux host the agent reads, with mlx5 names:

- ``sys/class/infiniband/mlx5_<k>/ports/1/{state,rate,counters/,hw_counters/}``
  and ``device/net/eth<k>`` (the RDMA device's interface),
- ``sys/class/net/eth<k>/{operstate,speed,carrier_changes}``,
- ``ethtool/eth<k>/statistics`` (``ethtool -S``: ``*_phy`` counters and
  ``rx_prio<p>_pause``/``tx_prio<p>_pause``) and ``ethtool/eth<k>/module``
  (``ethtool -m``: temperature, optical power),
- ``lldp/neighbors.json`` (``lldpcli -f json show neighbors``: the switch port
  each interface is cabled to).

NIC ``k`` is the host's k-th port in the topology. ``write(sim)`` (a driver
tick hook) refreshes the values of the tick just simulated; each file is
written whole and renamed into place, so a reader never sees half of one. A
host that is down is not updated. Retransmissions are written as
``packet_seq_err`` (``local_ack_timeout_err`` stays 0).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from fabricops.simulator.engine import Simulator
from fabricops.simulator.telemetry import NIC_COUNTERS

PRIORITIES = range(8)


def _put(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def _mw(dbm: float) -> str:
    return f"{10 ** (dbm / 10):.4f} mW / {dbm:.2f} dBm"


class HostTreeWriter:
    """Writes every host's NIC tree below ``out`` (see the module docstring)."""

    def __init__(self, sim: Simulator, out: Path) -> None:
        self.sim = sim
        self.out = out
        fab = sim.fabric
        self.hosts: list[tuple[str, list[int]]] = [
            (fab.node_ids[n], list(fab.node_ports(n)))
            for n in range(fab.n_nodes) if fab.node_is_host[n]]
        self._laid_out = False
        self.writes = 0

    def host_root(self, host: str) -> Path:
        return self.out / host

    def _lay_out(self) -> None:
        """Directories, the interface links and the LLDP table (they do not change)."""
        topo = self.sim.fabric.topology
        for host, ports in self.hosts:
            root = self.host_root(host)
            neighbours = []
            for k, port in enumerate(ports):
                ib = root / f"sys/class/infiniband/mlx5_{k}"
                for d in (ib / "ports/1/counters", ib / "ports/1/hw_counters",
                          ib / f"device/net/eth{k}", root / f"sys/class/net/eth{k}",
                          root / f"ethtool/eth{k}"):
                    d.mkdir(parents=True, exist_ok=True)
                _put(ib / f"device/net/eth{k}/ifindex", f"{k + 2}\n")
                peer = topo.peer_of.get(self.sim.fabric.port_ids[port])
                if peer is not None:
                    switch, _, name = peer.partition(":")
                    neighbours.append({f"eth{k}": {
                        "via": "LLDP", "chassis": {switch: {"id": {"type": "local",
                                                                    "value": switch}}},
                        "port": {"id": {"type": "ifname", "value": name}}}})
            (root / "lldp").mkdir(parents=True, exist_ok=True)
            _put(root / "lldp/neighbors.json",
                 json.dumps({"lldp": {"interface": neighbours}}, indent=1) + "\n")
        self._laid_out = True

    def write(self, sim: Simulator | None = None) -> None:
        """Refresh every reporting host's files with the last tick's values."""
        if not self._laid_out:
            self._lay_out()
        s = self.sim
        tel, fab = s.telemetry, s.fabric
        counters = {name: tel.counter(name) for name in tel.counter_names}
        nic_rows = {name: tel.nic_counters[i] for i, name in enumerate(NIC_COUNTERS)}
        gauges = {name: tel.gauge(name) for name in ("rx_power_dbm", "tx_power_dbm",
                                                      "temperature_c")}
        lossless = set(tel.priorities)
        for host, ports in self.hosts:
            node = fab.node_index(host)
            if not s.reporting[node]:
                continue
            root = self.host_root(host)
            for k, port in enumerate(ports):
                nic = int(fab.port_nic[port])
                c = {name: int(row[port]) for name, row in counters.items()}
                up = int(tel.oper_status[port]) == 1
                ib = root / f"sys/class/infiniband/mlx5_{k}/ports/1"
                speed_gbps = int(fab.port_speed_bps[port] // 10**9)
                _put(ib / "state", "4: ACTIVE\n" if up else "1: DOWN\n")
                _put(ib / "rate", f"{speed_gbps} Gb/sec (4X)\n")
                _put(ib / "counters/port_rcv_errors", f"{c['in_errors']}\n")
                _put(ib / "counters/port_xmit_discards", f"{c['out_discards']}\n")
                hw = {"np_cnp_sent": nic_rows["cnp_sent"][nic],
                      "rp_cnp_handled": nic_rows["cnp_handled"][nic],
                      "out_of_sequence": nic_rows["out_of_sequence"][nic],
                      "packet_seq_err": nic_rows["rdma_retransmits"][nic],
                      "local_ack_timeout_err": 0, "np_ecn_marked_roce_packets": 0}
                for name, value in hw.items():
                    _put(ib / "hw_counters" / name, f"{int(value)}\n")
                net = root / f"sys/class/net/eth{k}"
                _put(net / "operstate", "up\n" if up else "down\n")
                _put(net / "speed", f"{speed_gbps * 1000}\n" if up else "-1\n")
                _put(net / "carrier_changes", f"{c['carrier_transitions']}\n")
                _put(root / f"ethtool/eth{k}/statistics", _ethtool(c, lossless))
                _put(root / f"ethtool/eth{k}/module", _module(
                    *(float(g[port]) for g in gauges.values())))
                self.writes += 1


def _ethtool(c: dict[str, int], lossless: set[int]) -> str:
    stats = {"rx_bytes_phy": c["in_octets"], "tx_bytes_phy": c["out_octets"],
             "rx_packets_phy": c["in_pkts"], "tx_packets_phy": c["out_pkts"],
             "rx_crc_errors_phy": c["in_fcs_errors"], "rx_discards_phy": c["in_discards"],
             "tx_discards_phy": c["out_discards"],
             "link_down_events_phy": c["carrier_transitions"]}
    for d in ("rx", "tx"):
        for p in PRIORITIES:
            stats[f"{d}_prio{p}_pause"] = c[f"pfc_{d}_pause{{prio={p}}}"] if p in lossless else 0
    return "NIC statistics:\n" + "".join(f"     {k}: {v}\n" for k, v in stats.items())


def _module(rx_dbm: float, tx_dbm: float, temp_c: float) -> str:
    rx = _mw(rx_dbm) if np.isfinite(rx_dbm) and rx_dbm > -40 else "0.0000 mW / -inf dBm"
    return (f"\tModule temperature                        : {temp_c:.2f} degrees C\n"
            f"\tTransmit avg optical power (Channel 1)    : {_mw(tx_dbm)}\n"
            f"\tRcvr signal avg optical power(Channel 1)  : {rx}\n")
