"""What the actuator tells an observer while it acts: plans closing, victims requeued.

The service's :class:`~slurm_defrag.service.observer.Observer` (the Prometheus exporter)
extends this protocol with the cycle's own events; the executor needs only these two, and
defining them here keeps the actuator free of any import of the service above it.
"""

from __future__ import annotations

from typing import Literal, Protocol

PlanOutcome = Literal["done", "refused", "rolled-back", "failed"]
"""How a plan ended: carried out; refused at admission (limit, node in another plan);
rolled back cleanly; rolled back with an undo step failing."""


class ActionObserver(Protocol):
    def plan_closed(self, mode: str, outcome: PlanOutcome) -> None:
        """A plan of ``mode`` (enforce / dry-run) reached its end."""

    def requeued(self, mode: str, lost_gpu_seconds: float) -> None:
        """A victim was requeued (in the sandbox for dry-run); its run so far is lost."""


class NullActionObserver:
    """Observes nothing: the executor's default."""

    def plan_closed(self, mode: str, outcome: PlanOutcome) -> None:
        pass

    def requeued(self, mode: str, lost_gpu_seconds: float) -> None:
        pass


NO_ACTION_OBSERVER: ActionObserver = NullActionObserver()
