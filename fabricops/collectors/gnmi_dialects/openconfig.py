"""The OpenConfig profile: the catalogue's own paths, as any vendor serves them.

Built from openconfig/public: openconfig-interfaces (``/interfaces/interface/
state/counters``), openconfig-qos (egress queues, with ``3`` the lossless
queue, and PFC priorities), openconfig-platform-transceiver (lane 0 power) and
openconfig-platform (component temperature). What the catalogue has no metric
for is listed in ``OPENCONFIG_GAPS`` with the reason, so it is counted as
deliberately unsupported rather than unmapped.
"""

from __future__ import annotations

from typing import Final

from fabricops.collectors.gnmi_dialects.rules import Profile, Unsupported, rules
from fabricops.core.catalogue import Scope
from fabricops.core.openconfig import OPENCONFIG as OC_SCHEMA

IF: Final = "/interfaces/interface[name={if}]/state"
QUEUE: Final = "/qos/interfaces/interface[interface-id={if}]/output/queues/queue[name=3]/state"
PFC: Final = (
    "/qos/interfaces/interface[interface-id={if}]/pfc/priorities/priority[priority={prio}]/state"
)
XCVR: Final = (
    "/components/component[name={if}]/transceiver/physical-channels/channel[index=0]/state"
)

OPENCONFIG_RULES: Final = rules(
    [
        (f"{IF}/counters/in-octets", "in_octets"),
        (f"{IF}/counters/out-octets", "out_octets"),
        (f"{IF}/counters/in-unicast-pkts", "in_pkts"),
        (f"{IF}/counters/out-unicast-pkts", "out_pkts"),
        (f"{IF}/counters/in-errors", "in_errors"),
        (f"{IF}/counters/in-fcs-errors", "in_fcs_errors"),
        (f"{IF}/counters/in-discards", "in_discards"),
        (f"{IF}/counters/out-discards", "out_discards"),
        (f"{IF}/counters/carrier-transitions", "carrier_transitions"),
        (f"{IF}/oper-status", "oper_status"),
        (f"{QUEUE}/ecn-marked-pkts", "ecn_marked_pkts"),
        (f"{QUEUE}/instant-queue-len", "queue_depth_bytes"),
        (f"{QUEUE}/max-queue-len", "queue_watermark_bytes"),
        (f"{PFC}/in-pause-frames", "pfc_rx_pause"),
        (f"{PFC}/out-pause-frames", "pfc_tx_pause"),
        (f"{XCVR}/input-power/instant", "rx_power_dbm"),
        (f"{XCVR}/output-power/instant", "tx_power_dbm"),
        ("/components/component[name={if}]/state/temperature/instant", "temperature_c"),
    ]
)

OPENCONFIG_GAPS: Final = (
    Unsupported(
        "/interfaces/interface/state/counters",
        "multicast, broadcast, totals, out-errors, last-clear: no catalogue metric",
    ),
    Unsupported("/interfaces/interface/state", "interface attributes other than oper-status"),
    Unsupported("/interfaces/interface/config", "configuration"),
    Unsupported("/interfaces/interface/hold-time", "configuration"),
    Unsupported("/interfaces/interface/name", "list key"),
    Unsupported(
        "/interfaces/interface/ethernet", "MAC statistics; in-crc-errors repeats in-fcs-errors"
    ),
    Unsupported(
        "/interfaces/interface/subinterfaces", "sub-interfaces: the catalogue measures ports"
    ),
    Unsupported(
        "/qos/interfaces/interface/output/queues/queue",
        "queues other than the lossless queue 3, and queue leaves without a metric",
    ),
    Unsupported("/qos/interfaces/interface/pfc", "PFC leaves other than pause frames"),
    Unsupported("/qos/interfaces/interface/interface-id", "list key"),
    Unsupported("/components/component/transceiver", "transceiver leaves other than lane 0 power"),
    Unsupported("/components/component/state", "component leaves other than temperature"),
)

OPENCONFIG: Final = Profile(
    name="openconfig",
    description="OpenConfig models, any vendor",
    rules=OPENCONFIG_RULES,
    unsupported=OPENCONFIG_GAPS,
    paths=OC_SCHEMA.subtrees(Scope.PORT),
    encoding="PROTO",
    entity_lists=("/interfaces/interface[name={if}]",),
)
