"""Why a step did not go ahead (kopf's split between retry and give up).

"Retry later" is :class:`~slurm_defrag.slurm.failures.SlurmUnavailableError`: the step stays
``running`` and the next cycle runs it again. "Give up" is :class:`PermanentError`: the
plan is rolled back.
"""

from __future__ import annotations

from slurm_defrag.errors import DefragError, ExitCode


class PermanentError(DefragError):
    """The step can never succeed as planned: roll the plan back."""


class StepRefused(PermanentError):
    """A safety check stopped a step (protection, limit, state changed since planning)."""

    exit_code = ExitCode.REFUSED


class SimulatedCrash(BaseException):
    """Raised by the test crash hook in-process instead of ``os._exit(137)``.

    A BaseException so that no ``except Exception`` on the way can swallow it.
    """
