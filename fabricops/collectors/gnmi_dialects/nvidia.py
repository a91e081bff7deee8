"""NVIDIA Cumulus Linux (NVUE's gNMI server).

Cumulus Linux 5.x streams OpenConfig paths (interfaces and counters,
``openconfig-if-ethernet`` MAC counters, QoS egress queues and PFC per
priority, platform transceivers); port names are ``swp<n>`` and
``swp<n>s<m>``. The OpenConfig rules apply; Cumulus-specific additions
(per-priority-group ingress buffers, the NVIDIA histogram and WJH data) have
no catalogue metric and are named gaps.
"""

from __future__ import annotations

from typing import Final

from fabricops.collectors.gnmi_dialects.openconfig import (
    OPENCONFIG,
    OPENCONFIG_GAPS,
    OPENCONFIG_RULES,
)
from fabricops.collectors.gnmi_dialects.rules import Profile, Unsupported

CUMULUS: Final = Profile(
    name="cumulus",
    description="NVIDIA Cumulus Linux: OpenConfig over NVUE",
    rules=OPENCONFIG_RULES,
    unsupported=(
        Unsupported(
            "/qos/interfaces/interface/input", "ingress priority-group buffers: no catalogue metric"
        ),
        Unsupported("/qos/buffer", "shared buffer pools: no catalogue metric"),
        *OPENCONFIG_GAPS,
    ),
    paths=OPENCONFIG.paths,
    encoding="JSON_IETF",
    entity_lists=OPENCONFIG.entity_lists,
)
