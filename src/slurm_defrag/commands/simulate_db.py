"""``simulate --workload db:URL``: the service's stored snapshots as the site's jobs.

:func:`slurm_defrag.store.site_jobs.read_stored_jobs` reconstructs the jobs; this module
words what the command prints about them besides the table: the summary's head (how many
snapshots, over what time, how often) and the precision notes under it
(docs/site-workload.md, "The service's database").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from slurm_defrag.domain.accounting import SiteRead
from slurm_defrag.domain.cluster import ClusterSnapshot


@dataclass
class DbWorkload:
    read: SiteRead
    snapshot: ClusterSnapshot | None
    """The newest stored snapshot (None: ``-s`` gives the nodes)."""
    head: str
    """The summary line's head: ``61 snapshots of site, ...``."""
    notes: list[str]
    """Lines under the summary: what snapshot-derived times can and cannot know."""
    name: str
    """The database file's (or PostgreSQL database's) name, for the title."""
    label: str
    """``db:URL`` with the password hidden."""


def read_db(url: str, *, inventory: bool) -> DbWorkload:
    """The jobs of the database at ``url`` and the lines that describe them."""
    from slurm_defrag.store.site_jobs import read_stored_jobs

    stored = read_stored_jobs(url, inventory=inventory)
    read = stored.read
    period = _duration(stored.period_s)
    head = (
        f"{stored.snapshots} snapshots of {stored.cluster} from {_when(stored.first_t)} to "
        f"{_when(stored.last_t)} (every {period}), {stored.jobs_seen} jobs seen"
    )
    kept = len(read.jobs)
    starts = (
        f"all {kept} starts are"
        if stored.exact_starts == kept
        else f"{stored.exact_starts} of {kept} starts are"
    )
    notes = [
        f"times from snapshots taken every {period}: {starts} Slurm's StartTime (else: the "
        "first snapshot showing the job running), every end lies within one cycle (halfway "
        "is used); a job submitted and ended between two snapshots is in none of them: up "
        f"to {stored.unseen_ids} job ids between the first and last seen never appeared "
        "(docs/site-workload.md)"
    ]
    early = [j.submit_t for j in read.jobs if j.submit_t < stored.first_t]
    if early:
        hours = (stored.first_t - min(early)) / 3600
        notes.append(
            f"{len(early)} of the jobs replayed were submitted before the first snapshot "
            f"(up to {hours:.2f} h before it): --warmup-h {hours:.2f} measures only the "
            "time the snapshots cover"
        )
    if stored.other_clusters:
        notes.append(
            f"the database also holds {', '.join(stored.other_clusters)}: only "
            f"{stored.cluster}, the cluster of the newest snapshot, is replayed"
        )
    return DbWorkload(read, stored.newest, head, notes, stored.name, f"db:{stored.url}")


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 60:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"
