"""An in-memory Slurm: reader and writer over a snapshot, applying writes to its state.

Used by unit tests and, later, by dry-run (the same executor wired to this instead of a
real backend). It mimics what Slurm does with each write closely enough for planning:

* ``requeue`` frees the job's GPUs, CPUs and memory on its nodes and makes it PENDING with
  its request (reason ``Resources``: the steady state after Slurm's short BeginTime hold);
* reservations are added / removed, and an active one marks its nodes reserved;
* ``update_node`` handles ``State=DRAIN|RESUME|UNDRAIN|DOWN``, ``Reason=``, ``Weight=``;
* ``update_job`` stores ``Comment``, ``AdminComment`` and ``Priority`` (other fields are
  accepted and only logged in :attr:`FakeSlurm.calls`).

Refusals raise :class:`SlurmRejectedError` with Slurm's own wording where there is one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from slurm_defrag.domain.cluster import (
    HOLDS_GPUS,
    ClusterSnapshot,
    GpuRequest,
    Job,
    JobState,
    Node,
    NodeFlag,
    Reservation,
)
from slurm_defrag.slurm import ids
from slurm_defrag.slurm.failures import SlurmRejectedError
from slurm_defrag.slurm.parse.mapping import default_nvlink, reservation_state
from slurm_defrag.slurm.port import NewReservation, SlurmWriter

_DRAIN_FLAGS = frozenset({NodeFlag.DRAIN, NodeFlag.DRAINING, NodeFlag.DRAINED})
# Node field allocated -> job field held on each node (dumps leave out unset ones: .get).
_HOST_HELD = (("cpus_alloc", "cpus_per_node"), ("memory_alloc_mb", "memory_mb_per_node"))


class FakeSlurm(SlurmWriter):
    name = "fake"

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        clock: Callable[[], datetime] | None = None,
        *,
        cache_reads: bool = False,
    ) -> None:
        """``cache_reads``: keep each validated job and node until a write changes it (the
        dry-run sandbox, which only changes through its writer methods: re-validating
        5,870 jobs and 1,000 nodes after every write was most of a dry-run's 0.9 s). The
        cache starts with the snapshot's own models (frozen, so shared safely). Off for
        tests that edit ``jobs``/``nodes`` directly."""
        self._base = snapshot
        self._cache_reads = cache_reads
        self._job_models: dict[str, Job] = {j.id: j for j in snapshot.jobs} if cache_reads else {}
        self._node_models: dict[tuple[str, str | None], Node] = (
            {(n.name, n.reservation): n for n in snapshot.nodes} if cache_reads else {}
        )
        self._clock = clock or (lambda: datetime.now(UTC))
        self.nodes: dict[str, dict[str, Any]] = {n.name: n.model_dump() for n in snapshot.nodes}
        self.jobs: dict[str, dict[str, Any]] = {j.id: j.model_dump() for j in snapshot.jobs}
        self.reservations: dict[str, Reservation] = {r.name: r for r in snapshot.reservations}
        self._known_reservations = set(self.reservations)
        self.calls: list[tuple[str, ...]] = []
        """Every write, in order, as (method, target, details...): what dry-run shows."""

    # -- reader ------------------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        now = self._clock()
        active = {
            node: r.name
            for r in self.reservations.values()
            if reservation_state(r.start_time, r.end_time, now) == "ACTIVE"
            for node in r.nodes
        }
        nodes = []
        for data in self.nodes.values():
            # A node shows the active reservation covering it; a reservation name the fake
            # never saw in its list (another user's, hidden) stays as it came.
            node_resv = data["reservation"]
            if node_resv is None or node_resv in self._known_reservations:
                node_resv = active.get(data["name"])
            key = (data["name"], node_resv)
            node_model = self._node_models.get(key)
            if node_model is None:
                node_model = Node.model_validate({**data, "reservation": node_resv})
                if self._cache_reads:
                    self._node_models[key] = node_model
            nodes.append(node_model)
        jobs = tuple(self._job_model(job_id, data) for job_id, data in self.jobs.items())
        return ClusterSnapshot(
            cluster=self._base.cluster,
            taken_at=now,
            source=self.name,
            topologies=self._base.topologies,
            nodes=tuple(nodes),
            jobs=jobs,
            reservations=tuple(
                r.model_copy(update={"state": reservation_state(r.start_time, r.end_time, now)})
                for r in self.reservations.values()
            ),
            partitions=self._base.partitions,
            nvlink_domains=self._base.nvlink_domains,
            left_out=self._base.left_out,  # records its seed's reader could not identify
        )

    # -- writer ------------------------------------------------------------------------

    def create_reservation(self, r: NewReservation) -> None:
        # The same id checks as the real writers, so dry-run refuses what they would.
        name, nodes, duration_s, users, accounts, start = r.checked()
        self.calls.append(("create_reservation", name, ",".join(nodes)))
        unknown = [n for n in nodes if n not in self.nodes]
        if unknown:
            raise SlurmRejectedError(
                f"Slurm rejected create reservation {name}: "
                f"Invalid node name specified: {unknown[0]}"
            )
        existing = self.reservations.get(name)
        if existing is not None:
            if set(existing.nodes) == set(nodes):
                return
            raise SlurmRejectedError(
                f"Slurm rejected create reservation {name}: Duplicate reservation name"
            )
        begin = start or self._clock()
        self._known_reservations.add(name)
        self.reservations[name] = Reservation(
            name=name,
            nodes=tuple(nodes),
            start_time=begin,
            end_time=begin + timedelta(seconds=duration_s),
            users=tuple(users),
            accounts=tuple(accounts),
            flags=("IGNORE_JOBS", "SPEC_NODES"),
        )

    def delete_reservation(self, name: str) -> None:
        ids.reservation_name(name)
        self.calls.append(("delete_reservation", name))
        self.reservations.pop(name, None)

    def requeue(self, job_id: str, reason: str) -> None:
        ids.job_id(job_id)
        self.calls.append(("requeue", job_id, reason))
        job = self._job(job_id)
        self._changed(jobs=(job_id,), nodes=tuple(job["gpus"]))
        if job["state"] == JobState.PENDING:
            return  # already requeued: idempotent
        if job["state"] not in HOLDS_GPUS:
            raise SlurmRejectedError(
                f"Slurm rejected requeue {job_id}: Job is no longer pending execution"
            )
        if not job["requeue"]:
            raise SlurmRejectedError(
                f"Slurm rejected requeue {job_id}: Requested operation is presently disabled"
            )
        for node_name, idx in job["gpus"].items():
            node = self.nodes[node_name]
            node["gpus_used"] = sorted(set(node["gpus_used"]) - set(idx))
            for allocated, held in _HOST_HELD:
                node[allocated] = max(0, node.get(allocated, 0) - job.get(held, 0))
        job.update(
            state=JobState.PENDING,
            reason="Resources",
            start_time=None,
            request=job["request"] or _request_from(job),
            gpus={},
        )

    def update_job(self, job_id: str, **fields: str) -> None:
        ids.job_id(job_id)
        self.calls.append(("update_job", job_id, *(f"{k}={v}" for k, v in fields.items())))
        job = self._job(job_id)
        self._changed(jobs=(job_id,))
        for key, value in fields.items():
            k = key.lower()
            if k == "comment":
                job["comment"] = value
            elif k == "admincomment":
                job["admin_comment"] = value
            elif k == "priority":
                job["priority"] = int(value)

    def update_node(self, node: str, **fields: str) -> None:
        ids.node_name(node)
        self.calls.append(("update_node", node, *(f"{k}={v}" for k, v in fields.items())))
        self._changed(nodes=(node,))
        data = self.nodes.get(node)
        if data is None:
            raise SlurmRejectedError(
                f"Slurm rejected update node {node}: Invalid node name specified"
            )
        state = set(data["state"])
        for key, value in fields.items():
            k, v = key.lower(), value.upper()
            if k == "state" and v == "DRAIN":
                state.add(NodeFlag.DRAIN)
            elif k == "state" and v in ("RESUME", "UNDRAIN"):
                state -= _DRAIN_FLAGS | {NodeFlag.DOWN}
                data["reason"] = ""
            elif k == "state" and v == "DOWN":
                state.add(NodeFlag.DOWN)
            elif k == "state":
                raise SlurmRejectedError(
                    f"Slurm rejected update node {node}: Invalid node state specified"
                )
            elif k == "reason":
                data["reason"] = value
            elif k == "weight":
                data["weight"] = int(value)
            elif k in ("availablefeatures", "activefeatures"):
                data["features"] = [f for f in value.split(",") if f]
        data["state"] = sorted(state)

    def _changed(self, jobs: Sequence[str] = (), nodes: Sequence[str] = ()) -> None:
        """Forget the cached models of what a write changes. A reservation changes no
        job or node data: a node's cache key holds the reservation it shows."""
        for job_id in jobs:
            self._job_models.pop(job_id, None)
        if nodes:
            gone = set(nodes)
            for key in [k for k in self._node_models if k[0] in gone]:
                del self._node_models[key]

    def _job_model(self, job_id: str, data: dict[str, Any]) -> Job:
        model = self._job_models.get(job_id)
        if model is None:
            model = Job.model_validate(data)
            if self._cache_reads:
                self._job_models[job_id] = model
        return model

    def _job(self, job_id: str) -> dict[str, Any]:
        job = self.jobs.get(job_id)
        if job is None:
            raise SlurmRejectedError(f"Slurm rejected job {job_id}: Invalid job id specified")
        return job


def _request_from(job: dict[str, Any]) -> GpuRequest | None:
    """A requeued job asks again for what it held: same node count and GPUs per node."""
    counts = {len(idx) for idx in job["gpus"].values()}
    if len(counts) != 1:
        return None
    per_node = counts.pop()
    return GpuRequest(
        nodes=len(job["gpus"]), gpus_per_node=per_node, nvlink=default_nvlink(per_node)
    )
