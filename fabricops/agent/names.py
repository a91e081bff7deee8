"""Driver counter names to catalogue metrics: which file or statistic feeds which metric.

Each catalogue metric a NIC can give has an ordered list of ``Choice``s; the
first whose every name is available on a NIC is bound to it (``bind``) and
read from then on, so one series never mixes two sources. A choice sums its
names (a retransmission is a NAK'd sequence error or an ACK timeout) and
scales the sum (InfiniBand ``port_*_data`` counts 4-octet words).

Sources: ``ethtool`` (``ethtool -S`` of the interface), ``hw`` (the RDMA
port's ``hw_counters``; bnxt_re may keep them on the device), ``ib`` (the
RDMA port's ``counters``), ``net`` (``/sys/class/net/<if>/statistics``),
``link`` (``/sys/class/net/<if>``: ``carrier_changes``).

Names: mlx5 from the kernel's mlx5 ethtool counters documentation
(``*_phy`` physical-port counters, ``rx_prio<p>_pause``) and its RDMA
``hw_counters`` (``np_cnp_sent``, ``rp_cnp_handled``, ``out_of_sequence``,
``packet_seq_err``, ``local_ack_timeout_err``); bnxt_en/bnxt_re from the
kernel drivers' statistics tables (``rx_pfc_ena_frames_pri<p>``, older
``tx_cnp_pkts``/``rx_cnp_pkts``/``to_retransmits``/``seq_err_naks_rcvd``/
``res_oos_drop_count``, newer names shared with mlx5).

``EXTRAS`` are counters read for the operator that the catalogue has no
family for (pause duration, ECN-marked packets received); the agent exports
them on its own ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from fabricops.core.catalogue import PRIORITIES

SourceName = Literal["ethtool", "hw", "ib", "net", "link"]


@dataclass(frozen=True)
class Choice:
    """One way to read a metric: the sum of ``names`` of ``source``, times ``scale``."""

    source: SourceName
    names: tuple[str, ...]
    scale: int = 1

    def available(self, names: Mapping[SourceName, frozenset[str]]) -> bool:
        have = names.get(self.source, frozenset())
        return all(n in have for n in self.names)


def _c(source: SourceName, *names: str, scale: int = 1) -> Choice:
    return Choice(source, names, scale)


def _pfc(direction: str) -> dict[str, tuple[Choice, ...]]:
    return {f"pfc_{direction}_pause{{prio={p}}}": (
        _c("ethtool", f"{direction}_prio{p}_pause"),
        _c("ethtool", f"{direction}_pfc_ena_frames_pri{p}"),
    ) for p in PRIORITIES}


#: Counters of the NIC's switch-facing port, by catalogue metric name.
PORT_COUNTERS: Final[dict[str, tuple[Choice, ...]]] = {
    "in_octets": (_c("ethtool", "rx_bytes_phy"), _c("ib", "port_rcv_data", scale=4),
                  _c("net", "rx_bytes")),
    "out_octets": (_c("ethtool", "tx_bytes_phy"), _c("ib", "port_xmit_data", scale=4),
                   _c("net", "tx_bytes")),
    "in_pkts": (_c("ethtool", "rx_packets_phy"), _c("ethtool", "rx_good_frames"),
                _c("ib", "port_rcv_packets"), _c("net", "rx_packets")),
    "out_pkts": (_c("ethtool", "tx_packets_phy"), _c("ethtool", "tx_good_frames"),
                 _c("ib", "port_xmit_packets"), _c("net", "tx_packets")),
    "in_errors": (_c("ib", "port_rcv_errors"), _c("net", "rx_errors")),
    "in_fcs_errors": (_c("ethtool", "rx_crc_errors_phy"), _c("ethtool", "rx_fcs_err_frames"),
                      _c("net", "rx_crc_errors")),
    "in_discards": (_c("ethtool", "rx_discards_phy"), _c("ethtool", "rx_discard_frames"),
                    _c("net", "rx_dropped")),
    "out_discards": (_c("ethtool", "tx_discards_phy"), _c("ib", "port_xmit_discards"),
                     _c("net", "tx_dropped")),
    "carrier_transitions": (_c("link", "carrier_changes"),
                            _c("ethtool", "link_down_events_phy")),
    **_pfc("rx"),
    **_pfc("tx"),
}

#: RDMA (RoCE) counters of the NIC, by catalogue metric name.
NIC_COUNTERS: Final[dict[str, tuple[Choice, ...]]] = {
    "cnp_sent": (_c("hw", "np_cnp_sent"), _c("hw", "np_cnp_pkts"), _c("hw", "tx_cnp_pkts")),
    "cnp_handled": (_c("hw", "rp_cnp_handled"), _c("hw", "rx_cnp_pkts")),
    "rdma_retransmits": (_c("hw", "packet_seq_err", "local_ack_timeout_err"),
                         _c("hw", "seq_err_naks_rcvd", "to_retransmits")),
    "out_of_sequence": (_c("hw", "out_of_sequence"), _c("hw", "res_oos_drop_count")),
}

COUNTERS: Final = {**PORT_COUNTERS, **NIC_COUNTERS}

#: Counters without a catalogue family, exported by the agent: label -> choices.
EXTRAS: Final[dict[str, tuple[Choice, ...]]] = {
    "ecn_marked_roce_packets_received": (_c("hw", "np_ecn_marked_roce_packets"),
                                         _c("hw", "rx_ecn_marked_pkts")),
    "implied_nak_seq_err": (_c("hw", "implied_nak_seq_err"),),
    "rnr_nak_retry_err": (_c("hw", "rnr_nak_retry_err"), _c("hw", "rnr_naks_rcvd")),
    "out_of_buffer": (_c("hw", "out_of_buffer"),),
    **{f"{d}_pause_duration_us{{prio={p}}}": (
        _c("ethtool", f"{d}_prio{p}_pause_duration"),
        _c("ethtool", f"pfc_pri{p}_{d}_duration_us"),
    ) for d in ("rx", "tx") for p in PRIORITIES},
}


@dataclass(frozen=True)
class Binding:
    """Which choice feeds each metric on one NIC; metrics with none available are listed."""

    counters: dict[str, Choice]
    extras: dict[str, Choice]
    unavailable: tuple[str, ...]


def bind(names: Mapping[SourceName, frozenset[str]]) -> Binding:
    """The first available choice of every metric, given the names each source offers."""
    counters: dict[str, Choice] = {}
    unavailable: list[str] = []
    for metric, choices in COUNTERS.items():
        chosen = next((c for c in choices if c.available(names)), None)
        if chosen is None:
            unavailable.append(metric)
        else:
            counters[metric] = chosen
    extras: dict[str, Choice] = {}
    for label, choices in EXTRAS.items():
        chosen = next((c for c in choices if c.available(names)), None)
        if chosen is not None:
            extras[label] = chosen
    return Binding(counters, extras, tuple(unavailable))
