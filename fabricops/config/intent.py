"""The RoCE intent: the lossless-Ethernet policy a whole fabric should run.

A ``FabricIntent`` says which traffic is lossless and how congestion is signalled:
the classification (trust mode, DSCP -> traffic class, the CNP class), PFC and its
watchdog, ECN/WRED thresholds by port speed, the inputs of the buffer headroom
formula (``headroom``), ECMP hashing with a seed per switch tier, the load-balancing
mode and the NIC's DCQCN parameters. ``plan`` resolves it into one intent per
device (``devices``), which renders write and which a configuration check can
compare with what a device runs.

Conventions: switch priority, traffic class, egress queue and priority group share
one number (0-7); all DSCPs not named here map to ``default_priority``. Every model
is frozen, refuses unknown keys and carries units in its field names; a violated
rule raises a one-line ``ValueError`` that names the setting.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

Priority = Annotated[int, Field(ge=0, le=7)]
Dscp = Annotated[int, Field(ge=0, le=63)]
HashSeed = Annotated[int, Field(ge=0, le=2**32 - 1)]

#: Largest MTU every rendered platform accepts (EOS takes up to 9214).
MAX_MTU_BYTES = 9214


class TrustMode(StrEnum):
    """Which marking a port classifies on: the IP DSCP or the 802.1p PCP of a VLAN tag."""

    DSCP = "dscp"
    PCP = "pcp"


class LoadBalancing(StrEnum):
    """How switches spread flows over equal paths (not every platform has every mode)."""

    ECMP = "ecmp"
    WCMP = "wcmp"
    ADAPTIVE = "adaptive"
    FLOWLET = "flowlet"


class HashField(StrEnum):
    """A packet header field the ECMP hash reads."""

    SRC_IP = "src_ip"
    DST_IP = "dst_ip"
    IP_PROTOCOL = "ip_protocol"
    L4_SRC_PORT = "l4_src_port"
    L4_DST_PORT = "l4_dst_port"
    IPV6_FLOW_LABEL = "ipv6_flow_label"


class WatchdogAction(StrEnum):
    """What a PFC watchdog does with a queue stuck in pause: drop its traffic or ignore pauses."""

    DROP = "drop"
    FORWARD = "forward"


class _Intent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class QosPolicy(_Intent):
    """Classification: which DSCP is RoCE data (lossless) and which is CNP."""

    trust: TrustMode = Field(TrustMode.DSCP, description="Marking ports classify on")
    lossless_priority: Priority = Field(3, description="Priority/TC of RoCE data; PFC is on it")
    roce_dscp: Dscp = Field(26, description="DSCP the NICs put on RoCE data")
    cnp_priority: Priority = Field(6, description="Priority/TC of CNPs, served strict")
    cnp_dscp: Dscp = Field(48, description="DSCP the NICs put on CNPs")
    default_priority: Priority = Field(0, description="Priority/TC of all other traffic")
    cnp_shares_lossless: bool = Field(
        False, description="Allow CNPs on the lossless priority (paused with the data)")

    @model_validator(mode="after")
    def _check(self) -> QosPolicy:
        if self.roce_dscp == self.cnp_dscp:
            raise ValueError(f"roce_dscp and cnp_dscp are both {self.cnp_dscp}; "
                             "RoCE data and CNPs need distinct DSCPs")
        if self.cnp_priority == self.lossless_priority and not self.cnp_shares_lossless:
            raise ValueError(
                f"cnp_priority {self.cnp_priority} equals lossless_priority: CNPs would be "
                "paused behind the data they slow down (NVIDIA and SONiC keep CNP on its own "
                "strict class); set cnp_shares_lossless=true to allow it")
        if self.default_priority in (self.lossless_priority, self.cnp_priority):
            raise ValueError(
                f"default_priority {self.default_priority} is the lossless or the CNP class; "
                "other traffic must not be paused with RoCE or starve it from a strict queue")
        return self

    @property
    def dscp_to_tc(self) -> dict[int, int]:
        """All 64 DSCPs to their traffic class."""
        table = dict.fromkeys(range(64), self.default_priority)
        table[self.roce_dscp] = self.lossless_priority
        table[self.cnp_dscp] = self.cnp_priority
        return table


class WatchdogPolicy(_Intent):
    """PFC watchdog: a queue paused for ``detection_ms`` is declared stuck (pause storm)."""

    enabled: bool = True
    poll_interval_ms: int = Field(100, ge=100, le=1000, description="How often queues are read")
    detection_ms: int = Field(200, ge=100, le=5000, description="Paused this long means stuck")
    restoration_ms: int = Field(400, ge=100, le=60000, description="Quiet this long to restore")
    action: WatchdogAction = WatchdogAction.DROP

    @model_validator(mode="after")
    def _check(self) -> WatchdogPolicy:
        if self.poll_interval_ms % 10:
            raise ValueError(f"poll_interval_ms {self.poll_interval_ms} must be a multiple "
                             "of 10 ms (EOS takes seconds with 2 decimals)")
        for name in ("detection_ms", "restoration_ms"):
            value = getattr(self, name)
            if value % self.poll_interval_ms:
                raise ValueError(f"{name} {value} must be a multiple of poll_interval_ms "
                                 f"{self.poll_interval_ms}")
        return self


class PfcPolicy(_Intent):
    """PFC on the lossless priority (and nothing else), with its watchdog."""

    enabled: bool = Field(True, description="False runs RoCE lossy (ECN only)")
    watchdog: WatchdogPolicy = WatchdogPolicy()


class EcnProfile(_Intent):
    """ECN marking (WRED without drops) on the lossless queue of ports of one speed."""

    speed_bps: int = Field(gt=0)
    min_threshold_bytes: int = Field(gt=0, description="Queue depth where marking starts")
    max_threshold_bytes: int = Field(gt=0, description="Depth from which every packet is marked")
    mark_probability_pct: int = Field(ge=1, le=100, description="Marking probability at max")

    @model_validator(mode="after")
    def _check(self) -> EcnProfile:
        if self.min_threshold_bytes >= self.max_threshold_bytes:
            raise ValueError(
                f"ECN for {self.speed_bps / 1e9:g}G: min_threshold_bytes "
                f"{self.min_threshold_bytes} must be below max_threshold_bytes "
                f"{self.max_threshold_bytes}")
        return self


class HeadroomPolicy(_Intent):
    """Inputs of the headroom formula (see ``headroom``) and the buffer it must fit in."""

    pfc_response_ns: int = Field(2400, ge=0, description="PFC response time of a port pair")
    cable_m_by_tier: dict[str, float] = Field(
        default_factory=lambda: {"host-leaf": 3.0, "leaf-spine": 50.0, "leaf-agg": 50.0,
                                 "agg-core": 100.0, "switch-switch": 50.0},
        description="Cable length of a link whose length the topology does not give")
    switch_buffer_bytes: int = Field(64 * 2**20, gt=0, description="Packet buffer of a switch")
    max_headroom_share: float = Field(0.5, gt=0, le=1, description="Share headroom may take")

    @model_validator(mode="after")
    def _check(self) -> HeadroomPolicy:
        bad = {tier: m for tier, m in self.cable_m_by_tier.items() if not 0 < m <= 10_000}
        if bad:
            raise ValueError(f"cable_m_by_tier: lengths must be in (0, 10000] m, got {bad}")
        return self


class EcmpPolicy(_Intent):
    """Multipath: the mode, the hashed fields and one hash seed per switch tier."""

    load_balancing: LoadBalancing = LoadBalancing.ECMP
    hash_fields: tuple[HashField, ...] = (
        HashField.SRC_IP, HashField.DST_IP, HashField.IP_PROTOCOL,
        HashField.L4_SRC_PORT, HashField.L4_DST_PORT)
    tier_seeds: dict[str, HashSeed] = Field(
        default_factory=lambda: {"leaf": 11, "spine": 23, "agg": 37, "core": 53, "switch": 71})

    @model_validator(mode="after")
    def _check(self) -> EcmpPolicy:
        if len(set(self.hash_fields)) != len(self.hash_fields):
            raise ValueError("hash_fields lists a field twice")
        if HashField.L4_SRC_PORT not in self.hash_fields:
            raise ValueError("hash_fields must include l4_src_port: RoCEv2 carries its flow "
                             "entropy in the UDP source port (the destination is always 4791)")
        seen: dict[int, str] = {}
        for tier, seed in self.tier_seeds.items():
            if seed in seen:
                raise ValueError(f"hash seeds must differ per tier: {seen[seed]} and {tier} "
                                 f"both use {seed}, so their hashes polarize")
            seen[seed] = tier
        return self


class DcqcnReactionPoint(_Intent):
    """DCQCN at the sending NIC: how it cuts its rate on CNPs and climbs back (mlx5 names)."""

    rate_reduce_period_us: int = Field(4, gt=0, description="Minimum time between two cuts")
    alpha_update_period_us: int = Field(1, gt=0, description="Period of the alpha update")
    alpha_gain_1024: int = Field(1019, ge=0, le=1023, description="g of alpha, in 1/1024")
    initial_alpha_1024: int = Field(1023, ge=0, le=1023, description="Alpha on a first CNP")
    min_rate_mbps: int = Field(1, gt=0, description="Rate a flow never goes below")
    ai_rate_mbps: int = Field(5, gt=0, description="Additive increase step")
    hai_rate_mbps: int = Field(50, gt=0, description="Hyper increase step")
    rate_increase_period_us: int = Field(300, gt=0, description="Timer of a rate increase")
    fast_recovery_steps: int = Field(1, ge=1, le=31, description="Increases before additive")

    @model_validator(mode="after")
    def _check(self) -> DcqcnReactionPoint:
        if self.ai_rate_mbps > self.hai_rate_mbps:
            raise ValueError(f"ai_rate_mbps {self.ai_rate_mbps} must not exceed hai_rate_mbps "
                             f"{self.hai_rate_mbps}")
        return self


class DcqcnNotificationPoint(_Intent):
    """DCQCN at the receiving NIC; CNP DSCP and priority come from ``QosPolicy``."""

    min_time_between_cnps_us: int = Field(4, ge=0, description="Per-flow CNP rate limit")


class DcqcnPolicy(_Intent):
    """The NIC side of congestion control."""

    rp: DcqcnReactionPoint = DcqcnReactionPoint()
    np: DcqcnNotificationPoint = DcqcnNotificationPoint()


class FabricIntent(_Intent):
    """The RoCE policy of one fabric; ``plan`` fills it from a template and overrides."""

    name: str = "fabric"
    mtu_bytes: int = Field(9100, ge=1500, le=MAX_MTU_BYTES, description="L2 MTU of every port")
    qos: QosPolicy = QosPolicy()
    pfc: PfcPolicy = PfcPolicy()
    ecn_profiles: tuple[EcnProfile, ...] = ()
    headroom: HeadroomPolicy = HeadroomPolicy()
    ecmp: EcmpPolicy = EcmpPolicy()
    dcqcn: DcqcnPolicy = DcqcnPolicy()

    @model_validator(mode="after")
    def _check(self) -> FabricIntent:
        speeds = [p.speed_bps for p in self.ecn_profiles]
        if len(set(speeds)) != len(speeds):
            raise ValueError("ecn_profiles: two profiles for the same speed")
        buffer = self.headroom.switch_buffer_bytes
        for p in self.ecn_profiles:
            if p.min_threshold_bytes < self.mtu_bytes:
                raise ValueError(
                    f"ECN for {p.speed_bps / 1e9:g}G: min_threshold_bytes "
                    f"{p.min_threshold_bytes} is below one {self.mtu_bytes}-byte frame, "
                    "so every queued packet would be marked")
            if p.max_threshold_bytes > buffer:
                raise ValueError(
                    f"ECN for {p.speed_bps / 1e9:g}G: max_threshold_bytes "
                    f"{p.max_threshold_bytes} exceeds the switch buffer of {buffer} bytes")
        return self

    def ecn_for(self, speed_bps: int) -> EcnProfile:
        """The ECN profile of ports at ``speed_bps``; ValueError if there is none."""
        for profile in self.ecn_profiles:
            if profile.speed_bps == speed_bps:
                return profile
        have = ", ".join(f"{p.speed_bps / 1e9:g}G" for p in self.ecn_profiles) or "none"
        raise ValueError(f"no ECN profile for {speed_bps / 1e9:g}G ports (profiles: {have})")
