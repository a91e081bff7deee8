"""SONiC: OpenConfig (target ``OC-YANG``) and the Redis databases (target ``COUNTERS_DB``).

From sonic-net/sonic-gnmi (the telemetry server's DB paths and virtual paths)
and the SAI headers: with ``prefix.target`` a database name, a path is
``<table>/<key>[/<field>]``; ``COUNTERS/Ethernet0`` is a virtual path that
the server resolves through ``COUNTERS_PORT_NAME_MAP`` and answers with every
``SAI_PORT_STAT_*`` field of the port as a JSON object of decimal strings;
``COUNTERS/Ethernet0/Queues`` answers an object keyed ``Ethernet0:<queue>``
of ``SAI_QUEUE_STAT_*`` fields. ``APPL_DB`` ``PORT_TABLE/<port>/oper_status``
is ``up`` or ``down``; ``STATE_DB`` ``TRANSCEIVER_DOM_SENSOR/<port>`` has
``rx1power``, ``tx1power`` (dBm) and ``temperature`` as strings. Queue 3 is
the lossless queue.
"""

from __future__ import annotations

from typing import Final

from fabricops.collectors.gnmi_dialects.openconfig import (
    OPENCONFIG,
    OPENCONFIG_GAPS,
    OPENCONFIG_RULES,
)
from fabricops.collectors.gnmi_dialects.rules import Profile, Unsupported, rules

PORT: Final = "/COUNTERS/{if}"
QUEUE3: Final = "/COUNTERS/*/Queues/{if}:3"
DOM: Final = "/TRANSCEIVER_DOM_SENSOR/{if}"

SONIC_DB_RULES: Final = rules(
    [
        (f"{PORT}/SAI_PORT_STAT_IF_IN_OCTETS", "in_octets"),
        (f"{PORT}/SAI_PORT_STAT_IF_OUT_OCTETS", "out_octets"),
        (f"{PORT}/SAI_PORT_STAT_IF_IN_UCAST_PKTS", "in_pkts"),
        (f"{PORT}/SAI_PORT_STAT_IF_OUT_UCAST_PKTS", "out_pkts"),
        (f"{PORT}/SAI_PORT_STAT_IF_IN_ERRORS", "in_errors"),
        (f"{PORT}/SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS", "in_fcs_errors"),
        (f"{PORT}/SAI_PORT_STAT_IF_IN_DISCARDS", "in_discards"),
        (f"{PORT}/SAI_PORT_STAT_IF_OUT_DISCARDS", "out_discards"),
        (f"{PORT}/SAI_PORT_STAT_PFC_{{prio}}_RX_PKTS", "pfc_rx_pause"),
        (f"{PORT}/SAI_PORT_STAT_PFC_{{prio}}_TX_PKTS", "pfc_tx_pause"),
        (f"{QUEUE3}/SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES", "queue_depth_bytes"),
        (f"{QUEUE3}/SAI_QUEUE_STAT_WATERMARK_BYTES", "queue_watermark_bytes"),
        ("/PORT_TABLE/{if}/oper_status", "oper_status"),
        (f"{DOM}/rx1power", "rx_power_dbm"),
        (f"{DOM}/tx1power", "tx_power_dbm"),
        (f"{DOM}/temperature", "temperature_c"),
    ]
)

SONIC: Final = Profile(
    name="sonic",
    description="SONiC: COUNTERS_DB / APPL_DB / STATE_DB paths, and OpenConfig",
    rules=SONIC_DB_RULES + OPENCONFIG_RULES,
    unsupported=(
        Unsupported("/COUNTERS/*/Queues", "queues other than 3, queue packets, bytes and drops"),
        Unsupported("/COUNTERS/*/Pfcwd", "PFC watchdog state"),
        Unsupported(
            "/COUNTERS/*/SAI_PORT_STAT_PFC_*", "PFC pause durations"
        ),
        Unsupported("/COUNTERS", "multicast, broadcast, RMON buckets and other SAI port counters"),
        Unsupported("/PORT_TABLE", "port attributes other than oper_status"),
        Unsupported(
            "/TRANSCEIVER_DOM_SENSOR", "DOM leaves other than lane 1 power and temperature"
        ),
        *OPENCONFIG_GAPS,
    ),
    paths=("/COUNTERS/Ethernet*", "/COUNTERS/Ethernet*/Queues"),
    encoding="JSON_IETF",
    target="COUNTERS_DB",
    instances=frozenset({"COUNTERS", "Queues", "PORT_TABLE", "TRANSCEIVER_DOM_SENSOR"}),
    entity_lists=(PORT, "/PORT_TABLE/{if}", *OPENCONFIG.entity_lists),
)
