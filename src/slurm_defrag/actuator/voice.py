"""How the actuator words what it did: as done (enforce) or as what it would do (dry-run).

The executor never asks which mode it runs in to choose its words: the writer it is handed
at the wiring carries its :class:`Voice` (:attr:`AuditingWriter.voice
<slurm_defrag.actuator.audit.AuditingWriter.voice>`), :data:`ACTUAL` around the real
backend and :data:`PREVIEW` around the dry-run sandbox. Every log line, plan note and
audit row the executor writes takes its wording from there, so a dry-run never reads as
if Slurm had been changed ("would requeue job 123", not "step 2 requeue done").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

_PHRASES: dict[str, tuple[str, str]] = {
    # kind: (done, would) -- {job} victim, {target} target job, {nodes}, {res} reservation
    "reserve": ("created reservation {res} on {nodes}",
                "would create reservation {res} on {nodes}"),
    "drain": ("drained {nodes}", "would drain {nodes}"),
    "requeue": ("requeued job {job}", "would requeue job {job}"),
    "wait-free": ("the GPUs of job {target} are free", "would wait for the GPUs of job {target}"),
    "hand-over": ("handed reservation {res} to job {target}",
                  "would hand reservation {res} to job {target}"),
    "resume": ("resumed {nodes}", "would resume {nodes}"),
    "release": ("released reservation {res}", "would release reservation {res}"),
    "undo-reserve": ("removed reservation {res}", "would remove reservation {res}"),
    "undo-hand-over": ("took job {target} off reservation {res}",
                       "would take job {target} off reservation {res}"),
    "undo-drain": ("resumed {nodes}", "would resume {nodes}"),
}  # fmt: skip


@dataclass(frozen=True)
class Voice:
    """The wording of one channel; ``preview`` is True for the dry-run one."""

    preview: bool

    @property
    def tag(self) -> str:
        """Appended to what the executor logs: empty for real actions."""
        return " (dry-run: not executed)" if self.preview else ""

    def action(
        self,
        kind: str,
        *,
        job: str = "",
        target: str = "",
        nodes: Sequence[str] = (),
        reservation: str = "",
    ) -> str:
        """What one step did, or would do: ``requeued job 123`` / ``would requeue job 123``."""
        done, would = _PHRASES.get(kind, (f"{kind} done", f"would {kind}"))
        fields = {"job": job or target or "?", "target": target or job or "?",
                  "nodes": ",".join(nodes) or "-", "res": reservation or "-"}  # fmt: skip
        return (would if self.preview else done).format(**fields)

    def step_done(self, seq: int, kind: str, what: str) -> str:
        """The log line of a finished step (``seq`` counted from 1)."""
        if self.preview:
            return f"step {seq} {kind} (dry-run, not executed): {what}"
        return f"step {seq} {kind} done: {what}"

    def admitted(self) -> str:
        return "admitted for a dry-run preview" if self.preview else "admitted"

    def plan_done(self) -> str:
        return "previewed (dry-run, nothing changed in Slurm)" if self.preview else "done"

    def summary(self, served: str, victims: str) -> str:
        """The note of a finished plan."""
        if self.preview:
            return f"dry-run, not executed: would serve {served}; would requeue {victims}"
        return f"served {served}; requeued {victims}"

    def rolling_back(self) -> str:
        return "would roll back (dry-run)" if self.preview else "rolling back"

    def rolled_back(self, why: str) -> str:
        return f"would roll back (dry-run): {why}" if self.preview else f"rolled back: {why}"

    def refused(self, error: str) -> str:
        """The audit row's stderr for a refused write."""
        return f"would be refused: {error}" if self.preview else error


ACTUAL = Voice(preview=False)
PREVIEW = Voice(preview=True)
