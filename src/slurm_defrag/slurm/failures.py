"""The three ways talking to Slurm fails, so callers can decide to retry or give up."""

from __future__ import annotations

from slurm_defrag.errors import DefragError, ExitCode


class SlurmError(DefragError):
    """Base of all adapter errors."""


class SlurmUnavailableError(SlurmError):
    """Slurm did not answer (slurmctld down, timeout, socket refused): retry later."""

    exit_code = ExitCode.SLURM_UNAVAILABLE


class SlurmCommandMissing(SlurmUnavailableError):
    """The command could not be started: not on PATH, or a path that does not exist.

    ``command`` is what was missing: a Slurm client (``scontrol``) or, with a command
    prefix, the prefix's program (``docker``, ``sudo``): ``prefixed`` says which.
    """

    def __init__(self, what: str, command: str, *, prefixed: bool = False) -> None:
        self.command = command
        self.prefixed = prefixed
        where = "does not exist" if "/" in command else "is not on PATH"
        super().__init__(f"Slurm unavailable: {what}: {command} {where}")


class SlurmRejectedError(SlurmError):
    """Slurm answered and refused the request (bad job id, permission, invalid state)."""

    exit_code = ExitCode.SLURM_REJECTED


class SlurmParseError(SlurmError):
    """Slurm answered something we cannot read; the message names the field."""

    exit_code = ExitCode.SLURM_UNREADABLE


# Messages that mean "Slurm (or the way to it) is down", not "Slurm said no". Lower case;
# matched as substrings of stderr / REST error text / pyslurm RPCError messages.
_UNAVAILABLE_HINTS = (
    "unable to contact slurm controller",
    "unable to establish control machine address",  # client cannot even resolve slurmctld
    "unable to resolve",
    "slurmctld config is unable to load",  # slurmrestd up, slurmctld not (22.05)
    "connect failure",
    "connection refused",
    "communication connection failure",
    "socket timed out",
    "timed out",
    "zero bytes were transmitted",
    "backup controller in standby",
    "munge",  # munged down: nothing can authenticate until it is back
    "cannot connect to the docker daemon",
    "no such container",
    "is not running",
    "executable file not found",
)


def is_unavailable(message: str) -> bool:
    """True if a failure message says Slurm could not be reached (retry later)."""
    text = message.lower()
    return any(hint in text for hint in _UNAVAILABLE_HINTS)


def from_failure(what: str, message: str, stderr: str = "") -> SlurmError:
    """The error for a failed Slurm call: unavailable if the message says so, else rejected.

    ``what`` names the call (``squeue --json``, ``GET /slurm/v0.0.38/jobs``) so the one-line
    message tells the operator what failed. ``stderr`` is the client's stderr when the
    failure was reported in-band (JSON ``errors`` with exit 0): the real cause is often only
    there (22.05 ``squeue --json`` says "Failed while looking for jobs" and prints "Unable
    to establish control machine address" on stderr). Its last line is shown.
    """
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    if lines:
        message = f"{message} ({lines[-1]})"
    detail = " ".join(message.split()) or "no error message"
    if is_unavailable(message) or is_unavailable(stderr):
        return SlurmUnavailableError(f"Slurm unavailable: {what}: {detail}")
    return SlurmRejectedError(f"Slurm rejected {what}: {detail}")


# Refusals for want of rights (docker/README.md "Privileges", measured on 22.05 and 24.11):
# an Operator's node update gets "slurm_update error: Invalid user id", a plain user's
# requeue of another's job "Access/permission denied".
_DENIED_HINTS = ("access/permission denied", "invalid user id", "permission denied")


def is_permission_denied(message: str) -> bool:
    """True if a refusal says the account lacks the rights, not that the request was bad."""
    text = message.lower()
    return any(hint in text for hint in _DENIED_HINTS)
