"""The fault types fabricops knows, and the kind of entity each one strikes.

Shared by the simulator (which injects them), the RCA (which names them) and
remediation (which picks a remedy per type).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


class FaultType(StrEnum):
    LINK_DOWN = "link_down"
    LINK_FLAP = "link_flap"
    GRAY_LOSS = "gray_loss"
    OPTIC_DEGRADATION = "optic_degradation"
    HASH_POLARIZATION = "hash_polarization"
    INCAST = "incast"
    PFC_STORM = "pfc_storm"
    SLOW_RECEIVER = "slow_receiver"
    NIC_DOWN = "nic_down"
    SWITCH_DOWN = "switch_down"
    PFC_DEADLOCK = "pfc_deadlock"
    ECN_MISCONFIG = "ecn_misconfig"


class SettingFault(StrEnum):
    """Faults that change one setting of a device's running configuration.

    The twin obeys its running configuration, so each has the symptoms of the
    wrong value; a configuration check names the setting, and restoring the
    intended value ends it. They are not classes of the RCA model.
    """

    PFC_PRIORITY_MISMATCH = "pfc_priority_mismatch"
    MTU_MISMATCH = "mtu_mismatch"
    ECN_THRESHOLD = "ecn_threshold"
    HEADROOM_SHORT = "headroom_short"
    HASH_SEED_EQUAL = "hash_seed_equal"


Target = Literal["link", "nic", "host_or_nic", "switch"]
TARGETS: dict[FaultType, Target] = {
    FaultType.LINK_DOWN: "link",
    FaultType.LINK_FLAP: "link",
    FaultType.GRAY_LOSS: "link",
    FaultType.OPTIC_DEGRADATION: "link",
    FaultType.PFC_DEADLOCK: "link",
    FaultType.HASH_POLARIZATION: "switch",
    FaultType.SWITCH_DOWN: "switch",
    FaultType.ECN_MISCONFIG: "switch",
    FaultType.PFC_STORM: "nic",
    FaultType.NIC_DOWN: "nic",
    FaultType.INCAST: "nic",
    FaultType.SLOW_RECEIVER: "host_or_nic",
}
SETTING_TARGETS: dict[SettingFault, Target] = {
    SettingFault.PFC_PRIORITY_MISMATCH: "link",
    SettingFault.MTU_MISMATCH: "link",
    SettingFault.HEADROOM_SHORT: "link",
    SettingFault.ECN_THRESHOLD: "switch",
    SettingFault.HASH_SEED_EQUAL: "switch",
}
