"""Building the configured Bus: a ``kind`` key picks an entry of ``BUS_KINDS``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.bus import DEFAULT_PREFIX, Bus
from fabricops.core.kafkabus import KafkaBus, KafkaBusConfig
from fabricops.core.membus import MemoryBus, MemoryBusConfig
from fabricops.core.settings import BusSettings


class BusConfig(BaseModel):
    """Which bus to build, and the tuning of each kind.

    ``bootstrap_servers`` replaces ``kafka.bootstrap_servers``; ``topic_prefix``
    is for the callers that name topics (see ``fabricops.core.bus.topic_name``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["memory", "kafka"] = Field(default="memory", description="Bus implementation")
    bootstrap_servers: str = Field(default="127.0.0.1:9092", description="Kafka host:port[,...]")
    topic_prefix: str = Field(default=DEFAULT_PREFIX, description="Prefix of every topic name")
    memory: MemoryBusConfig = Field(default_factory=MemoryBusConfig)
    kafka: KafkaBusConfig = Field(default_factory=KafkaBusConfig)

    @classmethod
    def from_settings(cls, settings: BusSettings) -> BusConfig:
        """The config of the process settings' ``bus`` section (default tuning)."""
        return cls(kind=settings.kind, bootstrap_servers=settings.bootstrap_servers,
                   topic_prefix=settings.topic_prefix)


BusBuilder = Callable[[BusConfig, CollectorRegistry | None], Bus]


def _memory_bus(config: BusConfig, registry: CollectorRegistry | None) -> Bus:
    return MemoryBus(config.memory, registry)


def _kafka_bus(config: BusConfig, registry: CollectorRegistry | None) -> Bus:
    kafka = config.kafka.model_copy(update={"bootstrap_servers": config.bootstrap_servers})
    return KafkaBus(kafka, registry)


BUS_KINDS: dict[str, BusBuilder] = {"memory": _memory_bus, "kafka": _kafka_bus}


def make_bus(config: BusConfig, registry: CollectorRegistry | None = None) -> Bus:
    """An unstarted bus of ``config.kind``; its metrics go to ``registry``."""
    return BUS_KINDS[config.kind](config, registry)
