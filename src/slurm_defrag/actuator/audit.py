"""Every Slurm write, recorded: a decorator around any :class:`SlurmWriter`.

The executor never calls ``record_command`` itself; it wraps the writer once at the wiring
and says which plan step it is working on (:meth:`AuditingWriter.step`). The argv recorded
is the ``scontrol`` command line the write stands for, whatever the backend (the REST and
pyslurm backends issue the same change through other channels), so the audit reads the
same everywhere. Failures are recorded too: exit code 1 with Slurm's message for a
refusal, no exit code (NULL) when Slurm could not be reached.

The dry-run writer (``dry_run=True``, around the sandbox) records what it *would* issue:
``executed`` false and no exit code (nothing ran in Slurm), the sandbox's refusal, if any,
as ``would be refused: ...``. Its :attr:`AuditingWriter.voice` is the executor's wording
(:mod:`slurm_defrag.actuator.voice`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Protocol

from slurm_defrag.actuator.voice import ACTUAL, PREVIEW, Voice
from slurm_defrag.slurm import scontrol_argv
from slurm_defrag.slurm.failures import SlurmError, SlurmUnavailableError
from slurm_defrag.slurm.port import ForwardingWriter, SlurmWriter


class CommandLog(Protocol):
    """Where commands go: :class:`slurm_defrag.store.plans.Plans` in production."""

    def record_command(
        self,
        argv: Sequence[str],
        *,
        exit_code: int | None,
        duration_s: float,
        stdout: str = "",
        stderr: str = "",
        started_at: datetime | None = None,
        plan_id: int | None = None,
        step_id: int | None = None,
        dry_run: bool = False,
        executed: bool = True,
    ) -> int: ...


class AuditingWriter(ForwardingWriter):
    """A :class:`SlurmWriter` that records each call in the command log, then delegates."""

    def __init__(self, inner: SlurmWriter, log: CommandLog, *, dry_run: bool) -> None:
        super().__init__(inner)
        self.log = log
        self.dry_run = dry_run
        self.voice: Voice = PREVIEW if dry_run else ACTUAL
        """How the executor words what it does through this writer."""
        self._plan_id: int | None = None
        self._step_id: int | None = None

    @contextmanager
    def step(self, plan_id: int | None, step_id: int | None) -> Iterator[None]:
        """Attribute the commands issued inside the block to this plan step."""
        saved = self._plan_id, self._step_id
        self._plan_id, self._step_id = plan_id, step_id
        try:
            yield
        finally:
            self._plan_id, self._step_id = saved

    def _forward(self, method: str, /, *args: object, **fields: str) -> None:
        argv = scontrol_argv.BY_METHOD[method](*args, **fields)
        if method == "requeue":
            # scontrol requeue takes no reason; the reason is kept in the audit row instead.
            argv.append(f"# {args[1]}")
        started = time.perf_counter()
        exit_code: int | None = 0
        err = ""
        try:
            super()._forward(method, *args, **fields)
        except SlurmUnavailableError as exc:
            exit_code, err = None, str(exc)
            raise
        except SlurmError as exc:
            exit_code, err = 1, str(exc)
            raise
        finally:
            executed = not self.voice.preview  # the sandbox ran it, Slurm did not
            self.log.record_command(
                argv, exit_code=exit_code if executed else None,
                duration_s=time.perf_counter() - started,
                stderr=self.voice.refused(err) if err else "", plan_id=self._plan_id,
                step_id=self._step_id, dry_run=self.dry_run, executed=executed,
            )  # fmt: skip
