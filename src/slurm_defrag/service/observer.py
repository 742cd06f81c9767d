"""What the service tells an observer (the Prometheus exporter) while it works.

The cycle and the executor (:mod:`slurm_defrag.actuator`) call these methods where the
events happen; they never import a metrics library, so the core runs the same with no
observer at all (:data:`NO_OBSERVER`).
Slurm errors are counted at the Slurm boundary instead, by wrapping the backend once in
the wiring (:class:`ObservedSlurm`): every read and write of every step passes there, and
the dry-run sandbox (not Slurm) does not. So are the job records a read could not
understand (issue #40): the read goes on without them, but an operator must see them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

from slurm_defrag.actuator.events import ActionObserver, PlanOutcome
from slurm_defrag.domain.cluster import ClusterSnapshot, RecordPart
from slurm_defrag.domain.plan import Plan
from slurm_defrag.metrics.report import FragReport
from slurm_defrag.slurm.backends import SlurmBackend
from slurm_defrag.slurm.failures import SlurmError, SlurmParseError, SlurmUnavailableError
from slurm_defrag.slurm.port import ForwardingWriter

if TYPE_CHECKING:
    from slurm_defrag.service.loop import CycleReport

SlurmErrorKind = Literal["unavailable", "rejected", "parse"]


class Observer(ActionObserver, Protocol):
    """The actuator's events (:class:`~slurm_defrag.actuator.events.ActionObserver`) and the
    cycle's: what was measured and planned, how long a cycle took, Slurm errors."""

    def measured(self, report: FragReport) -> None:
        """The metrics of the snapshot this cycle just read."""

    def planned(self, plan: Plan) -> None:
        """The planner returned ``plan`` (with or without actions)."""

    def cycle_done(self, report: CycleReport, duration_s: float) -> None:
        """A cycle ended (whatever its outcome) after ``duration_s`` seconds."""

    def slurm_error(self, kind: SlurmErrorKind) -> None:
        """A Slurm call failed."""


class NullObserver:
    """Observes nothing: the default, and what ``slurm-defrag plan`` or tests get."""

    def measured(self, report: FragReport) -> None:
        pass

    def planned(self, plan: Plan) -> None:
        pass

    def plan_closed(self, mode: str, outcome: PlanOutcome) -> None:
        pass

    def requeued(self, mode: str, lost_gpu_seconds: float) -> None:
        pass

    def cycle_done(self, report: CycleReport, duration_s: float) -> None:
        pass

    def slurm_error(self, kind: SlurmErrorKind) -> None:
        pass


NO_OBSERVER: Observer = NullObserver()


def error_kind(exc: SlurmError) -> SlurmErrorKind:
    if isinstance(exc, SlurmUnavailableError):
        return "unavailable"
    if isinstance(exc, SlurmParseError):
        return "parse"
    return "rejected"


_R = TypeVar("_R")


def _ignore(part: RecordPart, count: int) -> None:
    pass


class ObservedSlurm(ForwardingWriter):
    """A Slurm backend (reader and writer) that reports each failed call, then re-raises,
    and the job records each snapshot could not read whole, by part."""

    def __init__(
        self,
        inner: SlurmBackend,
        on_error: Callable[[SlurmErrorKind], None],
        on_unreadable: Callable[[RecordPart, int], None] = _ignore,
    ) -> None:
        super().__init__(inner)
        self.inner: SlurmBackend = inner
        self.name = inner.name
        self.on_error = on_error
        self.on_unreadable = on_unreadable

    def _call(self, fn: Callable[..., _R], *args: object, **kw: object) -> _R:
        try:
            return fn(*args, **kw)
        except SlurmError as exc:
            self.on_error(error_kind(exc))
            raise

    def snapshot(self) -> ClusterSnapshot:
        snapshot = self._call(self.inner.snapshot)
        for part, count in snapshot.unreadable_parts().items():
            self.on_unreadable(part, count)
        return snapshot

    def _forward(self, method: str, /, *args: object, **fields: str) -> None:
        self._call(super()._forward, method, *args, **fields)
