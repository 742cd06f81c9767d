"""``defrag:`` keys in a job's Comment / AdminComment, and who may set each.

Slurm has no field for "this job checkpointed at ..." or "please never requeue me", but
every job carries two free-text comments: ``--comment`` (the job's owner writes it, at
submission and with ``scontrol update``) and ``AdminComment`` (only root and SlurmUser
may write it; job_submit.lua runs as slurmctld and writes it at submission). slurm-defrag
reads whitespace-, comma- or semicolon-separated tokens ``defrag:<key>`` or
``defrag:<key>=<value>``; other text is ignored.

:data:`COMMENT_KEYS` is the one table of those keys: where each is honoured from, and who
writes it there. A key is read only from the fields its entry names, AdminComment first.
``defrag:protect`` in particular is honoured from the AdminComment only: job_submit.lua
copies it there from the owner's ``--comment`` unless ``plugins render --no-user-protect``
(``allow_protect = false``) says users may not opt out, and an admin may write it there
directly. What the hook accepts is therefore exactly what the service honours, and an
owner cannot protect a job by writing the key where the hook would not have taken it.
Documented in ``docs/planner.md`` ("Comment keys").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from slurm_defrag.domain.cluster import Job

PREFIX = "defrag:"


class CommentField(StrEnum):
    """The two free-text fields of a job, by who may write them."""

    ADMIN = "AdminComment"
    """root, SlurmUser, and job_submit.lua at submission (it runs as slurmctld)"""
    USER = "Comment"
    """the job's owner (``--comment``, ``scontrol update job=N Comment=...``)"""


@dataclass(frozen=True)
class CommentKey:
    """One ``defrag:`` key: the fields it is honoured from (AdminComment first), who puts
    it there, and who reads it."""

    fields: tuple[CommentField, ...]
    written_by: str
    read_by: str


CHECKPOINT_KEY = "defrag:ckpt"
"""``defrag:ckpt=<ISO 8601 time or Unix epoch seconds>``: work before it survives a requeue."""
PROTECT_KEY = "defrag:protect"
"""``defrag:protect``: never requeue this job (recorded by job_submit.lua for its owner)."""
NVLINK_KEY = "defrag:nvlink"
"""``defrag:nvlink=K``: the job needs K NVLink-connected GPUs per node (0: any will do)."""
ANYGPU_KEY = "defrag:anygpu"
"""``defrag:anygpu``: any GPUs will do (job_submit.lua records it as ``defrag:nvlink=0``)."""

COMMENT_KEYS: dict[str, CommentKey] = {
    PROTECT_KEY: CommentKey(
        (CommentField.ADMIN,),
        "job_submit.lua, from the owner's --comment=defrag:protect at submission (unless "
        "`plugins render --no-user-protect`); or an admin",
        "the service: protection opt-out",
    ),
    CHECKPOINT_KEY: CommentKey(
        (CommentField.ADMIN, CommentField.USER),
        "the job itself as it checkpoints (Comment); or an admin. It only ever makes the "
        "owner's own job cheaper to requeue",
        "the service: the lost work a requeue costs",
    ),
    NVLINK_KEY: CommentKey(
        (CommentField.ADMIN, CommentField.USER),
        "job_submit.lua at submission (AdminComment, which then wins); without the hook the "
        "owner (Comment), about their own pending job",
        "the service: whether a pending job needs an NVLink block (slurm/parse/mapping.py)",
    ),
    "defrag:gpn": CommentKey(
        (CommentField.ADMIN,),
        "job_submit.lua at submission",
        "the epilog: whether an ending job held GPUs",
    ),
    "defrag:nodes": CommentKey(
        (CommentField.ADMIN,), "job_submit.lua at submission", "nobody: a record for people"
    ),
    ANYGPU_KEY: CommentKey(
        (CommentField.USER,),
        "the owner (--comment)",
        "job_submit.lua only (it records defrag:nvlink=0)",
    ),
}

_TOKEN = re.compile(r"[\s,;]+")


def _text(job: Job, field: CommentField) -> str:
    return job.admin_comment if field is CommentField.ADMIN else job.comment


def comment_keys(job: Job) -> dict[str, str]:
    """The job's ``defrag:`` keys, each read only from the fields :data:`COMMENT_KEYS`
    allows for it; the AdminComment wins over the Comment for the same key. Keys the
    table does not know are left out."""
    out: dict[str, str] = {}
    if not (job.comment or job.admin_comment):
        return out  # most jobs: asked twice each per plan (protections, checkpoint)
    for field in (CommentField.USER, CommentField.ADMIN):  # the admin's value last: wins
        for token in _TOKEN.split(_text(job, field)):
            if not token.startswith(PREFIX):
                continue
            key, _, value = token.partition("=")
            entry = COMMENT_KEYS.get(key)
            if entry is not None and field in entry.fields:
                out[key] = value
    return out


def parse_time(value: str) -> datetime | None:
    """An ISO 8601 time (naive = UTC) or Unix epoch seconds; None if neither."""
    value = value.strip()
    if not value:
        return None
    try:
        return datetime.fromtimestamp(float(value), tz=UTC)
    except (ValueError, OverflowError, OSError):
        pass
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def last_checkpoint(job: Job) -> datetime | None:
    """The job's declared last checkpoint, or None (none declared, or unreadable)."""
    value = comment_keys(job).get(CHECKPOINT_KEY)
    return parse_time(value) if value is not None else None
