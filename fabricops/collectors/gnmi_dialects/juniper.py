"""Juniper Junos: OpenConfig with Junos extensions, and the native PFE interface sensor.

Over gNMI the packet forwarding engine's interface sensor
(``/junos/system/linecard/interface/``) streams, besides the OpenConfig
counters, Junos-only leaves under the interface state: per egress queue
``out-queue[queue-number]`` with ``pkts``, ``bytes``, drops and buffer
occupancy (``cur-buffer-occupancy``, ``peak-buffer-occupancy``, in bytes).
The same sensor's native form keeps the names of Juniper's published
telemetry protos (``port.proto``: ``ingress_stats``, ``egress_stats``,
``ingress_errors``, ``egress_queue_info``), hyphenated as gNMI path elements
under ``/junos/system/linecard/interface/interface[name]``. Junos quotes key
values (``name='et-0/0/0'``); the quotes are not part of the port name.
Queue 3 is the lossless queue.
"""

from __future__ import annotations

from typing import Final

from fabricops.collectors.gnmi_dialects.openconfig import (
    OPENCONFIG,
    OPENCONFIG_GAPS,
    OPENCONFIG_RULES,
)
from fabricops.collectors.gnmi_dialects.rules import Profile, Unsupported, rules

OUT_Q: Final = "/interfaces/interface[name={if}]/state/counters/out-queue[queue-number=3]"
NATIVE: Final = "/junos/system/linecard/interface/interface[name={if}]"

JUNOS_RULES: Final = rules(
    [
        (f"{OUT_Q}/cur-buffer-occupancy", "queue_depth_bytes"),
        (f"{OUT_Q}/peak-buffer-occupancy", "queue_watermark_bytes"),
        (f"{NATIVE}/ingress-stats/if-octets", "in_octets"),
        (f"{NATIVE}/egress-stats/if-octets", "out_octets"),
        (f"{NATIVE}/ingress-stats/if-uc-pkts", "in_pkts"),
        (f"{NATIVE}/egress-stats/if-uc-pkts", "out_pkts"),
        (f"{NATIVE}/ingress-errors/if-errors", "in_errors"),
        (f"{NATIVE}/ingress-errors/if-in-frame-errors", "in_fcs_errors"),
        (f"{NATIVE}/ingress-errors/if-discards", "in_discards"),
        (f"{NATIVE}/egress-errors/if-discards", "out_discards"),
        (f"{NATIVE}/egress-queue-info[queue-number=3]/cur-buffer-occupancy", "queue_depth_bytes"),
        (
            f"{NATIVE}/egress-queue-info[queue-number=3]/peak-buffer-occupancy",
            "queue_watermark_bytes",
        ),
        (f"{NATIVE}/if-operational-status", "oper_status"),
    ]
)

JUNOS: Final = Profile(
    name="junos",
    description="Juniper Junos: OpenConfig, out-queue extensions, native PFE sensor",
    rules=JUNOS_RULES + OPENCONFIG_RULES,
    unsupported=(
        Unsupported(
            "/interfaces/interface/state/counters/out-queue",
            "queues other than 3, queue packets, bytes and drops",
        ),
        Unsupported(
            "/interfaces/interface/state/counters/in-queue", "ingress queues: no catalogue metric"
        ),
        Unsupported(
            "/junos/system/linecard/interface/interface/egress-queue-info",
            "queues other than 3, queue packets, bytes and drops",
        ),
        Unsupported(
            "/junos/system/linecard/interface/interface",
            "multicast, broadcast, 1-second rates, pause and L2 errors",
        ),
        Unsupported("/interfaces/interface/state/parent-ae-name", "LAG membership"),
        Unsupported("/interfaces/interface/state/high-speed", "speed"),
        *OPENCONFIG_GAPS,
    ),
    paths=("/junos/system/linecard/interface/",),
    encoding="PROTO",
    entity_lists=(*OPENCONFIG.entity_lists, NATIVE),
)
