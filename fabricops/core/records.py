"""Small control records on the bus, with their JSON codec (low volume, readable)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SamplingPolicy(BaseModel):
    """The sampling interval the pipeline asks collectors to use for a device.

    ``device`` ``"*"`` sets the default for every device. A policy past
    ``expires_ns`` (if set) no longer applies and the default returns.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(min_length=1)
    interval_s: float = Field(gt=0, le=3600)
    ts_ns: int = Field(ge=0, description="When the policy was issued")
    expires_ns: int | None = Field(default=None, ge=0)
    reason: str = ""

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, data: bytes) -> SamplingPolicy:
        return cls.model_validate_json(data)
