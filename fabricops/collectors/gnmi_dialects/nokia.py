"""Nokia SR Linux (``srl_nokia-*`` models).

From nokia/srlinux-yang-models: ``srl_nokia-interfaces``
``/interface[name]/statistics`` (``in-octets``, ``in-unicast-packets``,
``in-error-packets``, ``in-fcs-error-packets``, ``in-discarded-packets``, and
the ``out-`` twins, ``carrier-transitions``), ``/interface[name]/oper-state``
(``up``, ``down``, ...), the transceiver (``srl_nokia-interfaces``
``transceiver/channel[index]/input-power/latest-value``, dBm, lanes numbered
from 1; ``transceiver/temperature/latest-value``, Celsius) and ``srl_nokia-qos``
PFC counters per priority (``/qos/interfaces/interface[interface-id]/pfc/
pfc-priority[index]`` with ``pfc-pause-frames-received`` and
``pfc-pause-frames-generated``) and per queue depth
(``queue-depth/high-watermark-1``: the highest depth of the last minute, bytes).
The lossless queue is ``unicast-3`` (7250 IXR) or ``queue-3``.
"""

from __future__ import annotations

from typing import Final

from fabricops.collectors.gnmi_dialects.rules import Profile, Unsupported, rules

SRL_IF: Final = "/interface[name={if}]"
STATS: Final = f"{SRL_IF}/statistics"
XCVR: Final = f"{SRL_IF}/transceiver"
QOS: Final = "/qos/interfaces/interface[interface-id={if}]"

SRL_RULES: Final = rules(
    [
        (f"{STATS}/in-octets", "in_octets"),
        (f"{STATS}/out-octets", "out_octets"),
        (f"{STATS}/in-unicast-packets", "in_pkts"),
        (f"{STATS}/out-unicast-packets", "out_pkts"),
        (f"{STATS}/in-error-packets", "in_errors"),
        (f"{STATS}/in-fcs-error-packets", "in_fcs_errors"),
        (f"{STATS}/in-discarded-packets", "in_discards"),
        (f"{STATS}/out-discarded-packets", "out_discards"),
        (f"{STATS}/carrier-transitions", "carrier_transitions"),
        (f"{SRL_IF}/oper-state", "oper_status"),
        (f"{XCVR}/channel[index=1]/input-power/latest-value", "rx_power_dbm"),
        (f"{XCVR}/channel[index=1]/output-power/latest-value", "tx_power_dbm"),
        (f"{XCVR}/temperature/latest-value", "temperature_c"),
        (f"{QOS}/pfc/pfc-priority[index={{prio}}]/pfc-pause-frames-received", "pfc_rx_pause"),
        (f"{QOS}/pfc/pfc-priority[index={{prio}}]/pfc-pause-frames-generated", "pfc_tx_pause"),
        (
            f"{QOS}/output/queues/queue[queue-name=unicast-3]/queue-depth/high-watermark-1",
            "queue_watermark_bytes",
        ),
        (
            f"{QOS}/output/queues/queue[queue-name=queue-3]/queue-depth/high-watermark-1",
            "queue_watermark_bytes",
        ),
    ]
)

SR_LINUX: Final = Profile(
    name="srlinux",
    description="Nokia SR Linux: srl_nokia-interfaces, srl_nokia-qos",
    rules=SRL_RULES,
    unsupported=(
        Unsupported(
            "/interface/statistics",
            "multicast, broadcast, totals, mirror octets, out-errors: no metric",
        ),
        Unsupported(
            "/interface/transceiver", "transceiver leaves other than lane 1 power and temperature"
        ),
        Unsupported("/interface/ethernet", "MAC statistics and settings"),
        Unsupported("/interface/subinterface", "sub-interfaces: the catalogue measures ports"),
        Unsupported("/interface", "interface attributes other than oper-state"),
        Unsupported(
            "/qos/interfaces/interface/pfc", "PFC totals, transitions and deadlock recoveries"
        ),
        Unsupported(
            "/qos/interfaces/interface/output/queues",
            "queues other than the lossless one, queue statistics and averages",
        ),
    ),
    paths=(
        "/interface/statistics",
        "/interface/oper-state",
        "/interface/transceiver",
        "/qos/interfaces/interface/pfc",
        "/qos/interfaces/interface/output/queues/queue/queue-depth",
    ),
    encoding="JSON_IETF",
    entity_lists=(SRL_IF,),
)
