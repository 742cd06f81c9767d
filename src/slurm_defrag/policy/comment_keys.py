"""``defrag:`` keys that users and admins write into a job's Comment / AdminComment.

Slurm has no field for "this job checkpointed at ..." or "please never requeue me", but
every job carries two free-text comments (``--comment`` for the user, ``AdminComment``
for operators and plugins). slurm-defrag reads whitespace-, comma- or semicolon-separated
tokens of the form ``defrag:<key>`` or ``defrag:<key>=<value>`` from both; other text is
ignored. Documented in ``docs/planner.md``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from slurm_defrag.domain.cluster import Job

PREFIX = "defrag:"
CHECKPOINT_KEY = "defrag:ckpt"
"""``defrag:ckpt=<ISO 8601 time or Unix epoch seconds>``: work before it survives a requeue."""
PROTECT_KEY = "defrag:protect"
"""``defrag:protect``: the job's owner asks never to be requeued by slurm-defrag."""

_TOKEN = re.compile(r"[\s,;]+")


def comment_keys(job: Job) -> dict[str, str]:
    """``defrag:`` keys of a job; AdminComment wins over Comment for the same key."""
    out: dict[str, str] = {}
    for text in (job.comment, job.admin_comment):
        for token in _TOKEN.split(text):
            if not token.startswith(PREFIX):
                continue
            key, _, value = token.partition("=")
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
