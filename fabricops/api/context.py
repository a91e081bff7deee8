"""What the API serves from: the store, the topology, the metrics, and (when the
fabric is simulated) a way to inject faults. Built once per process."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from fabricops.core.faults import FaultType, SettingFault
from fabricops.core.liveness import Liveness
from fabricops.core.topology import Topology
from fabricops.store.store import Store, StoreError


class ApiConfig(BaseModel):
    """The REST API's listening address and access rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(default="127.0.0.1", description="Address to listen on")
    port: int = Field(default=8080, ge=0, le=65535, description="TCP port (0: any free port)")
    token: SecretStr = Field(default=SecretStr(""), description=(
        "Bearer token that mutating calls must present; empty refuses every mutation"))
    active_s: float = Field(default=90.0, gt=0, description=(
        "A diagnosis not revised for this long counts as cleared"))
    max_points: int = Field(default=20_000, gt=0, description="Most points one series answer")


class FaultRequest(BaseModel):
    """A fault to inject into the simulated fabric now."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: FaultType | SettingFault = Field(
        description="A fault, or a wrong setting planted in the running configuration")
    entity: str = Field(min_length=1, max_length=255, description="Link, switch, NIC or host")
    duration_s: float | None = Field(default=None, gt=0, le=1e7,
                                     description="How long it lasts (None: until stopped)")
    params: dict[str, float | int | str] = Field(
        default_factory=dict, description="Fault parameters, e.g. loss_rate for gray_loss")


class FaultInjector(Protocol):
    """The simulated fabric's fault switch. ``inject`` raises ValueError naming what is
    wrong (an unknown entity, a wrong kind, a bad parameter)."""

    def inject(self, request: FaultRequest) -> Mapping[str, Any]: ...


@dataclass
class ApiContext:
    """The API's dependencies. ``checks`` are readiness probes: name -> (ok, detail);
    ``liveness`` is the process's book of workers (``/ready`` fails while one is dead)."""

    config: ApiConfig
    store: Store | None = None
    topology: Topology | None = None
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    injector: FaultInjector | None = None
    checks: dict[str, Callable[[], tuple[bool, str]]] = field(default_factory=dict)
    liveness: Liveness | None = None

    def stored(self) -> Store:
        """The store; StoreError (answered 503) in a process that keeps none."""
        if self.store is None:
            raise StoreError("this fabricops process keeps no store (ask the API of "
                             "fabricops serve api)")
        return self.store
