"""Configuration of the SNMP poller: the switches it polls and how hard it may push."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabricops.core.inventory import Inventory, SnmpCredentials


class SnmpTarget(BaseModel):
    """One switch to poll."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(min_length=1, description="Device id; entities are device:ifName")
    host: str = Field(default="127.0.0.1", description="IPv4 address or name")
    port: int = Field(default=161, ge=1, le=65535, description="UDP port of the agent")
    credentials: SnmpCredentials = Field(
        default_factory=lambda: SnmpCredentials(community="public"),
        description="v2c community, or v3 user, keys and context")
    interval_s: float = Field(default=10.0, gt=0, le=3600, description="Unless a policy says")
    timeout_s: float = Field(default=1.0, gt=0, le=60, description="Per request try")
    retries: int = Field(default=1, ge=0, le=10, description="Tries after the first")

    @model_validator(mode="after")
    def _complete(self) -> SnmpTarget:
        c = self.credentials
        if c.version == "v2c" and not c.community:
            raise ValueError(f"SNMP target {self.device}: v2c needs a community")
        if c.version == "v3" and not (c.user and c.auth_key and c.priv_key):
            raise ValueError(f"SNMP target {self.device}: v3 needs user, auth_key and priv_key")
        return self

    @property
    def where(self) -> str:
        return f"SNMP target {self.device} ({self.host}:{self.port})"


class SnmpPollerConfig(BaseModel):
    """Targets and how hard the poller may push."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    targets: tuple[SnmpTarget, ...] = Field(default=(), description="One per device")
    max_in_flight: int = Field(default=32, ge=1, description="Walks at once")
    max_probes_in_flight: int = Field(default=8, ge=1, description="Probes of down targets")
    down_probe_interval_s: float = Field(
        default=5.0, gt=0, le=3600, description="How often a down target is probed")
    max_repetitions: int = Field(default=32, ge=1, le=1000,
                                 description="GETBULK rows per column and request")
    max_varbinds_per_request: int = Field(default=512, ge=1,
                                          description="Caps rows x columns of one GETBULK")
    describe_every_polls: int = Field(default=60, ge=1,
                                      description="Re-read port names and sensor encodings")
    max_rows_per_column: int = Field(default=100_000, ge=1,
                                     description="A longer column fails the poll")
    pfc_fallback_priority: int | None = Field(
        default=3, ge=0, le=7, description="Priority of IEEE8021-PFC-MIB per-port totals")

    @model_validator(mode="after")
    def _unique(self) -> SnmpPollerConfig:
        seen: set[str] = set()
        for t in self.targets:
            if t.device in seen:
                raise ValueError(f"SNMP target {t.device} is listed twice")
            seen.add(t.device)
        return self


def targets_from_inventory(inventory: Inventory) -> tuple[SnmpTarget, ...]:
    """The inventory's SNMP targets with their effective intervals."""
    return tuple(
        SnmpTarget(device=t.device, host=t.host_port()[0], port=t.host_port()[1],
                   credentials=t.snmp, interval_s=inventory.interval_of(t))
        for t in inventory.by_protocol("snmp"))


__all__ = ["SnmpPollerConfig", "SnmpTarget", "targets_from_inventory"]
