"""Strategy registry: policy name -> (args model, factory). Add new strategies here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from slurm_defrag.policy import free_nvlink_block
from slurm_defrag.policy.base import Strategy


@dataclass(frozen=True, slots=True)
class StrategyEntry:
    name: str
    args: type[BaseModel]
    factory: Callable[[Any], Strategy]
    description: str


REGISTRY: dict[str, StrategyEntry] = {
    e.name: e
    for e in (
        StrategyEntry(
            name=free_nvlink_block.NAME,
            args=free_nvlink_block.FreeNvlinkBlockArgs,
            factory=free_nvlink_block.FreeNvlinkBlock,
            description="falsely starved pending GPU jobs become targets",
        ),
    )
}


def known_names() -> str:
    return ", ".join(sorted(REGISTRY))
