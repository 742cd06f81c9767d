"""The Slurm port on a simulated cluster: reader and writer over a :class:`LiveCluster`.

A backend like ``cli``, ``rest`` and ``pyslurm`` (:mod:`slurm_defrag.slurm.port`), handed
to the service by its composition root (:func:`slurm_defrag.wiring.build`) in their
place; the service cannot tell the difference. Every write takes effect in the
simulated cluster, as ``scontrol`` would in slurmctld:

====================================  ===================================================
writer call                           in the simulated cluster
====================================  ===================================================
``create_reservation``                an IGNORE_JOBS reservation of the nodes for the
                                      users/accounts, from ``start`` (now) for
                                      ``duration_s``: its nodes take only the jobs that
                                      name it
``delete_reservation``                removed (absent: success); refused while a running
                                      job is in it; pending jobs in it are detached
``requeue``                           the job's GPUs free, the job PENDING (``BeginTime``
                                      for 120 s), its work since its last checkpoint lost;
                                      it runs again when the scheduler places it
``update_job ReservationName=R``      a pending job may now start only in R ("" detaches
                                      any job, a running one included)
``update_job Priority=0`` / ``=N``    hold (``JobHeldAdmin``) / release with priority N
``update_job StartTime=T``            a pending job starts no earlier than T (``now``)
``update_job Comment= AdminComment=`` stored, shown in the next snapshot
``update_node State=DRAIN Reason=``   no new job on the node, running ones go on
``update_node State=RESUME|UNDRAIN``  the drain lifted
``update_node Weight=``               the node's place in the scheduler's order
``update_node Available/ActiveFeatures=``  the node's features
====================================  ===================================================

Any other field or state is refused, as an unknown ``scontrol`` word would be: the demo
must not pretend to apply what it does not model. Ids and names are checked like the real
writers check them (:mod:`slurm_defrag.slurm.ids`), and slurmctld's refusals
(:class:`~slurm_defrag.sim.live.Refused`) become :class:`SlurmRejectedError`, which the
executor rolls a plan back on.

The simulated time only moves when the demo's driver advances the cluster, between
service cycles: a cycle sees the cluster still, as it sees a real one between two
scheduling passes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.sim.live import LiveCluster, Refused
from slurm_defrag.slurm import ids
from slurm_defrag.slurm.failures import SlurmRejectedError
from slurm_defrag.slurm.port import NewReservation, SlurmWriter

_JOB_FIELDS = ("reservationname", "priority", "starttime", "comment", "admincomment")
_NODE_FIELDS = ("state", "reason", "weight", "availablefeatures", "activefeatures")


class SimSlurm(SlurmWriter):
    """Reader and writer of the Slurm port over ``cluster`` (see the module docstring)."""

    name = "simulator"

    def __init__(self, cluster: LiveCluster) -> None:
        self.cluster = cluster
        self.calls: list[tuple[str, ...]] = []
        """Every write, in order, as (method, target, details...)."""

    # -- reader ------------------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        return self.cluster.snapshot()

    # -- writer ------------------------------------------------------------------------

    def create_reservation(self, r: NewReservation) -> None:
        name, nodes, duration_s, users, accounts, start = r.checked()
        self.calls.append(("create_reservation", name, ",".join(nodes)))
        begin = self.cluster.now if start is None else self._seconds(start)
        with self._refusals(f"create reservation {name}"):
            self.cluster.create_reservation(name, nodes, users, accounts, begin, duration_s)

    def delete_reservation(self, name: str) -> None:
        ids.reservation_name(name)
        self.calls.append(("delete_reservation", name))
        with self._refusals(f"delete reservation {name}"):
            self.cluster.delete_reservation(name)

    def requeue(self, job_id: str, reason: str) -> None:
        ids.job_id(job_id)
        self.calls.append(("requeue", job_id, reason))
        with self._refusals(f"requeue {job_id}"):
            self.cluster.requeue(job_id)

    def update_job(self, job_id: str, **fields: str) -> None:
        ids.job_id(job_id)
        self.calls.append(("update_job", job_id, *(f"{k}={v}" for k, v in fields.items())))
        what = f"update job {job_id}"
        _known(fields, _JOB_FIELDS, what)
        with self._refusals(what):
            for key, value in fields.items():
                k = key.lower()
                if k == "reservationname":
                    self.cluster.set_reservation(job_id, value)
                elif k == "priority":
                    self.cluster.set_priority(job_id, _int(value, "Invalid job priority"))
                elif k == "starttime":
                    self.cluster.set_begin(job_id, self._time(value))
                elif k == "comment":
                    self.cluster.set_comment(job_id, comment=value)
                else:
                    self.cluster.set_comment(job_id, admin=value)

    def update_node(self, node: str, **fields: str) -> None:
        ids.node_name(node)
        self.calls.append(("update_node", node, *(f"{k}={v}" for k, v in fields.items())))
        what = f"update node {node}"
        _known(fields, _NODE_FIELDS, what)
        lowered = {k.lower(): v for k, v in fields.items()}
        with self._refusals(what):
            state = lowered.get("state", "").upper()
            reason = lowered.get("reason")
            if state == "DRAIN":
                self.cluster.drain(node, reason or "")
            elif state in ("RESUME", "UNDRAIN"):
                self.cluster.resume(node)
            elif state:
                raise Refused("Invalid node state specified")
            elif reason is not None:
                self.cluster.set_reason(node, reason)
            if "weight" in lowered:
                self.cluster.set_weight(node, _int(lowered["weight"], "Invalid weight"))
            features = lowered.get("availablefeatures", lowered.get("activefeatures"))
            if features is not None:
                self.cluster.set_features(node, [f for f in features.split(",") if f])

    # -- helpers -----------------------------------------------------------------------

    @contextmanager
    def _refusals(self, what: str) -> Iterator[None]:
        try:
            yield
        except Refused as exc:
            raise SlurmRejectedError(f"Slurm rejected {what}: {exc}") from None

    def _seconds(self, at: datetime) -> float:
        return (at - self.cluster.epoch).total_seconds()

    def _time(self, text: str) -> float:
        """``now``, ``now+N`` (seconds) or an ISO time, as ``StartTime=`` takes them."""
        t = text.strip().lower()
        if t == "now":
            return self.cluster.now
        if t.startswith("now+") and t[4:].isdecimal():
            return self.cluster.now + int(t[4:])
        try:
            at = datetime.fromisoformat(text)
        except ValueError:
            raise Refused("Invalid time specification") from None
        if at.tzinfo is None:  # scontrol reads local time; the simulated cluster is UTC
            at = at.replace(tzinfo=self.cluster.epoch.tzinfo)
        return self._seconds(at)


def _known(fields: dict[str, str], known: Sequence[str], what: str) -> None:
    if not fields:
        raise SlurmRejectedError(f"Slurm rejected {what}: nothing to update")
    bad = sorted(k for k in fields if k.lower() not in known)
    if bad:
        raise SlurmRejectedError(
            f"Slurm rejected {what}: the simulated cluster does not model {bad[0]}="
        )


def _int(text: str, refusal: str) -> int:
    if not text.strip().isdecimal():
        raise Refused(refusal)
    return int(text)
