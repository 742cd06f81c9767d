"""Where a pending job stands in Slurm's queue: the jobs of its partition ahead of it.

A planner target is a job that fragmentation, not priority, keeps waiting. Under a site's
priorities (fair-share, QOS, age) a large job deep in the queue would wait for the jobs
ahead of it even on an unfragmented cluster: freeing a block for it would let it overtake
them, a change of the site's order nobody asked for (issue #41). This module gives each
pending job its place among the jobs that wait on resources in its partitions, in the
order slurmctld schedules them: priority, then submit time, then job id.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from slurm_defrag.domain.cluster import ClusterSnapshot, Job, JobState
from slurm_defrag.metrics.demand import waits_on_resources

_NEVER = datetime.min.replace(tzinfo=UTC)


def _order(job: Job) -> tuple[int, datetime, str]:
    return (-job.priority, job.submit_time or _NEVER, job.id)


def queue_positions(snapshot: ClusterSnapshot) -> dict[str, int]:
    """Pending job id -> how many jobs waiting on resources are ahead of it in the queue
    of any of its partitions (0: at the head). Held jobs (hold, dependency, begin time)
    are in nobody's way and have no place."""
    queues: dict[str, list[Job]] = defaultdict(list)
    for job in snapshot.jobs:
        if job.state == JobState.PENDING and waits_on_resources(job.reason):
            for partition in (job.partition or "").split(","):
                queues[partition].append(job)
    ahead: dict[str, int] = {}
    for queue in queues.values():
        queue.sort(key=_order)
        for place, job in enumerate(queue):
            ahead[job.id] = min(ahead.get(job.id, place), place)
    return ahead
