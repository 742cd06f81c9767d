"""Jobs that are never requeued, as named protections (descheduler's PodProtections shape).

Each :class:`Protection` is a rule with a name. :data:`MANDATORY_PROTECTIONS` are always
on (no policy can disable them: they guard what slurm-defrag cannot know);
:data:`DEFAULT_PROTECTIONS` are on unless the policy lists them under
``protections.disable``; :data:`EXTRA_PROTECTIONS` are off unless listed under
``protections.extra``. The lists of partitions, QOS, accounts, users
and job names feed the matching rules. :func:`compile_protections` turns the configuration
into a list of ``(protection, check)`` functions once; the planner filters candidates with
it and the executor re-checks against a fresh read right before acting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from slurm_defrag.domain.cluster import Job, JobState
from slurm_defrag.policy.comment_keys import PROTECT_KEY, comment_keys, last_checkpoint


class Protection(StrEnum):
    """A reason a running job must never be requeued."""

    PARTITION = "partition"
    """the job runs in a partition listed in ``protections.partitions``"""
    QOS = "qos"
    """the job's QOS is listed in ``protections.qos``"""
    ACCOUNT = "account"
    """the job's account is listed in ``protections.accounts``"""
    USER = "user"
    """the job's user is listed in ``protections.users``"""
    JOB_NAME = "job-name"
    """the job's name matches a glob in ``protections.job_names``"""
    NO_REQUEUE = "no-requeue"
    """the job was submitted with ``--no-requeue`` (Requeue=0)"""
    MIN_RUNTIME = "min-runtime"
    """the job has run less than ``protections.min_runtime_minutes``"""
    OPT_OUT = "opt-out"
    """the job's AdminComment carries ``defrag:protect``: its owner opted out through
    job_submit.lua, or an admin wrote it (:data:`~slurm_defrag.policy.comment_keys.COMMENT_KEYS`)"""
    UNKNOWN_START = "unknown-start"
    """the job has no start time: the work a requeue loses cannot be priced"""
    NO_CHECKPOINT = "no-checkpoint"
    """the job declares no ``defrag:ckpt=`` checkpoint (extra)"""
    MULTI_NODE = "multi-node"
    """the job spans several nodes (extra): requeueing it frees more than one block needs"""
    LARGE_JOB = "large-job"
    """the job holds at least ``protections.large_job_gpus`` GPUs on a node (extra): trading
    one large job for another only churns"""
    UNREADABLE_RECORD = "unreadable-record"
    """Slurm's record of the job could not be read whole (``Job.unreadable``, issue #40):
    what a requeue would cost or free is unknown (always on)"""


MANDATORY_PROTECTIONS: frozenset[Protection] = frozenset({Protection.UNREADABLE_RECORD})


DEFAULT_PROTECTIONS: frozenset[Protection] = frozenset(
    {
        Protection.PARTITION,
        Protection.QOS,
        Protection.ACCOUNT,
        Protection.USER,
        Protection.JOB_NAME,
        Protection.NO_REQUEUE,
        Protection.MIN_RUNTIME,
        Protection.OPT_OUT,
        Protection.UNKNOWN_START,
    }
)
EXTRA_PROTECTIONS: frozenset[Protection] = frozenset(
    {Protection.NO_CHECKPOINT, Protection.MULTI_NODE, Protection.LARGE_JOB}
)


def _names(ps: frozenset[Protection]) -> str:
    return ", ".join(sorted(p.value for p in ps))


def _default_name(v: str) -> Protection:
    if v in MANDATORY_PROTECTIONS:
        raise ValueError(f"'{v}' is always on: it cannot be disabled")
    if v in EXTRA_PROTECTIONS:
        raise ValueError(
            f"'{v}' is an extra protection (off by default): enable it with protections.extra"
        )
    if v not in DEFAULT_PROTECTIONS:
        raise ValueError(f"unknown protection '{v}', must be one of {_names(DEFAULT_PROTECTIONS)}")
    return Protection(v)


def _extra_name(v: str) -> Protection:
    if v in MANDATORY_PROTECTIONS:
        raise ValueError(f"'{v}' is always on: nothing to enable")
    if v in DEFAULT_PROTECTIONS:
        raise ValueError(f"'{v}' is a default protection (always on unless disabled)")
    if v not in EXTRA_PROTECTIONS:
        raise ValueError(f"unknown protection '{v}', must be one of {_names(EXTRA_PROTECTIONS)}")
    return Protection(v)


def _no_duplicates(v: list[Protection]) -> list[Protection]:
    seen: set[Protection] = set()
    for p in v:
        if p in seen:
            raise ValueError(f"'{p.value}' listed twice")
        seen.add(p)
    return v


class ProtectionsConfig(BaseModel):
    """``[protections]`` of the policy file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    disable: Annotated[
        list[Annotated[str, AfterValidator(_default_name)]], AfterValidator(_no_duplicates)
    ] = Field(default_factory=list)
    """Default protections to switch off."""
    extra: Annotated[
        list[Annotated[str, AfterValidator(_extra_name)]], AfterValidator(_no_duplicates)
    ] = Field(default_factory=list)
    """Extra protections to switch on."""
    partitions: list[str] = Field(default_factory=list)
    qos: list[str] = Field(default_factory=list)
    accounts: list[str] = Field(default_factory=list)
    users: list[str] = Field(default_factory=list)
    job_names: list[str] = Field(default_factory=list)
    """Shell-style globs (``jupyter-*``) matched against the job name."""
    large_job_gpus: Annotated[int, Field(ge=1)] = 4
    """With the ``large-job`` protection: jobs holding this many GPUs on a node or more."""
    min_runtime_minutes: Annotated[float, Field(ge=0)] = 10.0
    """Jobs younger than this are left alone: they have lost little, but requeueing them
    again and again would starve them (and a job that just started is often still staging)."""

    @property
    def enabled(self) -> frozenset[Protection]:
        return (
            MANDATORY_PROTECTIONS
            | (DEFAULT_PROTECTIONS - {Protection(p) for p in self.disable})
            | {Protection(p) for p in self.extra}
        )


Check = Callable[[Job], str | None]
"""Returns why the job is protected (e.g. ``QOS=prod``), or None."""


def _in(field: str, label: str, values: Sequence[str]) -> Check:
    allowed = frozenset(values)

    def check(job: Job) -> str | None:
        value = getattr(job, field)
        return f"{label}={value}" if value in allowed else None

    return check


@dataclass(frozen=True)
class Protector:
    """Compiled protections: ask :meth:`reasons` once per job."""

    checks: tuple[tuple[Protection, Check], ...]

    def reasons(self, job: Job) -> tuple[str, ...]:
        """Why ``job`` must not be requeued (empty: it may be)."""
        out = []
        for _, check in self.checks:
            why = check(job)
            if why is not None:
                out.append(why)
        return tuple(out)

    def is_protected(self, job: Job) -> bool:
        return any(check(job) is not None for _, check in self.checks)


def compile_protections(cfg: ProtectionsConfig, now: datetime) -> Protector:
    """Build the enabled checks once; ``now`` anchors the minimum-runtime rule."""
    min_run_s = cfg.min_runtime_minutes * 60

    def min_runtime(job: Job) -> str | None:
        if job.start_time is None:
            return None
        ran = (now - job.start_time).total_seconds()
        if ran < min_run_s:
            return f"running {ran / 60:.0f} min < min_runtime {cfg.min_runtime_minutes:g} min"
        return None

    def job_name(job: Job) -> str | None:
        hit = next((p for p in cfg.job_names if fnmatchcase(job.name, p)), None)
        return f"name={job.name} (matches {hit})" if hit is not None else None

    def large_job(job: Job) -> str | None:
        most = max((len(g) for g in job.gpus.values()), default=0)
        if most >= cfg.large_job_gpus:
            return f"holds {most} GPUs on a node (large_job_gpus {cfg.large_job_gpus})"
        return None

    table: dict[Protection, Check] = {
        Protection.PARTITION: _in("partition", "partition", cfg.partitions),
        Protection.QOS: _in("qos", "QOS", cfg.qos),
        Protection.ACCOUNT: _in("account", "account", cfg.accounts),
        Protection.USER: _in("user", "user", cfg.users),
        Protection.JOB_NAME: job_name,
        Protection.NO_REQUEUE: lambda j: None if j.requeue else "Requeue=0",
        Protection.MIN_RUNTIME: min_runtime,
        Protection.OPT_OUT: lambda j: (
            f"owner opted out ({PROTECT_KEY})" if PROTECT_KEY in comment_keys(j) else None
        ),
        Protection.UNKNOWN_START: lambda j: None if j.start_time else "no start time",
        Protection.NO_CHECKPOINT: lambda j: (
            None if last_checkpoint(j) is not None else "no checkpoint declared"
        ),
        Protection.MULTI_NODE: lambda j: f"spans {len(j.gpus)} nodes" if len(j.gpus) > 1 else None,
        Protection.LARGE_JOB: large_job,
        # The part only (a fixed word): the reason itself quotes what Slurm printed.
        Protection.UNREADABLE_RECORD: lambda j: (
            f"record unreadable ({j.unreadable_part})" if j.unreadable else None
        ),
    }
    enabled = cfg.enabled
    # Fixed order (enum order) so that reasons read the same in every plan.
    return Protector(tuple((p, table[p]) for p in Protection if p in enabled))


def movable(job: Job) -> bool:
    """Only running jobs are requeued; completing/suspended jobs free or keep GPUs anyway."""
    return job.state == JobState.RUNNING and job.holds_gpus
