"""Settings of the host agent: strict, with defaults that fit a GPU server."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class AgentConfig(BaseModel):
    """What the agent reads, how often, and how it names what it reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    root: Path = Field(default=Path("/"), description="Read sysfs (and, below a root other "
                       "than '/', recorded ethtool and lldpcli outputs) under this directory")
    host: str = Field(default="", description="Device id of this host in the topology "
                      "(default: the short host name)")
    interval_s: float = Field(default=1.0, gt=0, le=3600,
                              description="Sampling interval until a sampling policy says else")
    topology: Path | None = Field(default=None, description="Topology document (JSON/YAML): "
                                  "with LLDP, names each NIC by the switch port it is cabled to")
    nics: dict[str, str] = Field(default_factory=dict, description="RDMA device, device/port "
                                 "or interface -> NIC name (nic3) or entity id (host-017:nic3)")
    lldp: bool = Field(default=True, description="Read LLDP neighbours (lldpd) to map NICs")
    rediscover_s: float = Field(default=60.0, gt=0, description="How often devices, LLDP "
                                "neighbours and counter bindings are looked up again")
    optics: bool = Field(default=True, description="Read transceiver diagnostics (ethtool -m)")
    live_ethtool: bool | None = Field(default=None, description="Ask the kernel for ethtool "
                                      "statistics (default: only when root is '/')")

    @property
    def live(self) -> bool:
        """True when reading the running kernel, not a recorded tree."""
        return self.live_ethtool if self.live_ethtool is not None else self.root == Path("/")
