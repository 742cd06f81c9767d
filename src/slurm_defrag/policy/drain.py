"""``[drain]``: consolidating by letting blockers finish instead of requeueing them."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class DrainConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    max_wait_hours: Annotated[float, Field(ge=0)] = 2.0
    """Only blocks whose blockers all reach their time limit within this many hours are
    drained for; the target waits at most this long."""
