"""The ``cli`` backend: scontrol, squeue and sinfo, ``--json`` where it exists.

What is read, per Slurm release (detected once from ``scontrol --version``):

=============  ===============================  =================================
object         Slurm 23.02+ (recorded: 24.11)   Slurm 21.08-22.05 (recorded: 22.05)
=============  ===============================  =================================
jobs           ``squeue --json``                ``squeue --json``
nodes          ``scontrol show nodes --json``   ``sinfo --json`` (one entry per node)
partitions     ``scontrol show partitions --json``  ``scontrol show partition`` (text)
reservations   ``scontrol show reservations --json``  ``scontrol show reservation`` (text)
=============  ===============================  =================================

(24.11's ``sinfo --json`` groups nodes, so it is not used there.) When a ``--json`` command
is refused (older Slurm, no JSON serializer plugin) the ``scontrol show`` text is read
instead. With ``cross_check_text`` on, ``scontrol show job -d`` is read as well and every
running job's per-node GPU indices must agree with the JSON.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from slurm_defrag.domain.cluster import HOLDS_GPUS, ClusterSnapshot, Job, Reservation
from slurm_defrag.slurm import ids, openapi, scontrol_text
from slurm_defrag.slurm.assemble import Parts, assemble
from slurm_defrag.slurm.errors import SlurmParseError, SlurmRejectedError
from slurm_defrag.slurm.mapping import Doc
from slurm_defrag.slurm.runner import Runner, run, run_capture, subprocess_runner
from slurm_defrag.slurm.settings import SlurmSettings

log = logging.getLogger(__name__)

JSON_SCONTROL_SINCE = (23, 2)
"""First release with ``scontrol show ... --json``."""

_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class CliSlurm:
    """Reader and writer over the Slurm command-line tools."""

    name = "cli"

    def __init__(
        self,
        settings: SlurmSettings | None = None,
        runner: Runner | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings or SlurmSettings()
        self._runner = runner or subprocess_runner
        self._clock = clock or (lambda: datetime.now(UTC))
        self._version: tuple[int, int] | None = None

    # -- plumbing ----------------------------------------------------------------------

    def run(self, *args: str) -> str:
        s = self.settings
        return run(self._runner, s.command_prefix, args, s.command_timeout_s)

    def run_json(self, *args: str) -> Any:
        s = self.settings
        out, err = run_capture(self._runner, s.command_prefix, args, s.command_timeout_s)
        return self.decode(out, " ".join(args), err)

    @staticmethod
    def decode(out: str, what: str, stderr: str = "") -> Any:
        """JSON output -> data; Slurm's in-band ``errors`` raise like a failed command."""
        try:
            data = json.loads(out)
        except json.JSONDecodeError as exc:
            raise SlurmParseError(
                f"{what}: output is not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
            ) from None
        openapi.check_errors(data, what, stderr)
        return data

    def version(self) -> tuple[int, int]:
        """(major, minor) from ``scontrol --version`` (``slurm 22.05.8``), cached."""
        if self._version is None:
            out = self.run("scontrol", "--version")
            match = re.search(r"(\d+)\.(\d+)", out)
            if match is None:
                raise SlurmParseError(f"scontrol --version: no version in {out.strip()!r}")
            self._version = (int(match[1]), int(match[2]))
        return self._version

    # -- reader ------------------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        taken_at = self._clock()
        modern = self.version() >= JSON_SCONTROL_SINCE
        jobs, cluster = self._jobs()
        nodes = self._objects(
            ("scontrol", "show", "nodes", "--json") if modern else ("sinfo", "--json"),
            ("scontrol", "show", "node", "-d"),
            lambda fam, doc: fam.nodes(doc),
            scontrol_text.nodes,
        )
        partitions = self._objects(
            ("scontrol", "show", "partitions", "--json") if modern else None,
            ("scontrol", "show", "partition"),
            lambda fam, doc: fam.partitions(doc),
            scontrol_text.partitions,
        )
        reservations = self._objects(
            ("scontrol", "show", "reservations", "--json") if modern else None,
            ("scontrol", "show", "reservation"),
            lambda fam, doc: fam.reservations(doc, taken_at),
            lambda text, where: scontrol_text.reservations(text, where, taken_at),
        )
        parts = Parts(nodes, jobs, partitions, reservations, cluster)
        return assemble(
            parts, source=self.name, taken_at=taken_at, settings=self.settings, where="cli"
        )

    def _objects(
        self,
        json_cmd: tuple[str, ...] | None,
        text_cmd: tuple[str, ...],
        from_json: Callable[[openapi.V0038, Doc], list[Any]],
        from_text: Callable[[str, str], list[Any]],
    ) -> list[Any]:
        if json_cmd is not None:
            where = " ".join(json_cmd)
            # Only a refused command means "no JSON here"; errors inside the JSON are real.
            try:
                out = self.run(*json_cmd)
            except SlurmRejectedError as exc:
                log.warning("%s; reading %s text instead", exc, " ".join(text_cmd))
            else:
                data = self.decode(out, where)
                return from_json(openapi.family(data, where), Doc(data, where, ""))
        return from_text(self.run(*text_cmd), " ".join(text_cmd))

    def _jobs(self) -> tuple[list[Job], str | None]:
        text_cmd = ("scontrol", "show", "job", "-d")
        try:
            out = self.run("squeue", "--json")
        except SlurmRejectedError as exc:
            log.warning("%s; reading %s text instead", exc, " ".join(text_cmd))
            return scontrol_text.jobs(self.run(*text_cmd), " ".join(text_cmd)), None
        data = self.decode(out, "squeue --json")
        fam = openapi.family(data, "squeue --json")
        doc = Doc(data, "squeue --json", "")
        jobs = fam.jobs(doc)
        if self.settings.cross_check_text:
            cross_check(jobs, scontrol_text.jobs(self.run(*text_cmd), " ".join(text_cmd)))
        return jobs, fam.cluster(doc)

    # -- writer ------------------------------------------------------------------------

    def create_reservation(
        self,
        name: str,
        nodes: Sequence[str],
        users: Sequence[str],
        accounts: Sequence[str],
        start: datetime | None,
        duration_s: int,
    ) -> None:
        name, nodes = ids.reservation_name(name), ids.node_names(nodes)
        users, accounts = ids.principals(users, "user"), ids.principals(accounts, "account")
        args = [
            "scontrol", "create", "reservation",
            f"ReservationName={name}",
            f"Nodes={','.join(nodes)}",
            # Slurm reads the time in its TZ, which the runner sets to UTC.
            "StartTime=" + ("now" if start is None else _utc(start)),
            f"Duration={max(1, math.ceil(duration_s / 60))}",
            "Flags=IGNORE_JOBS",
        ]
        if users:
            args.append(f"Users={','.join(users)}")
        if accounts:
            args.append(f"Accounts={','.join(accounts)}")
        try:
            self.run(*args)
        except SlurmRejectedError:
            existing = self._reservation(name)
            if existing is None or set(existing.nodes) != set(nodes):
                raise
            log.info("reservation %s already exists with the same nodes", name)

    def delete_reservation(self, name: str) -> None:
        name = ids.reservation_name(name)
        try:
            self.run("scontrol", "delete", f"ReservationName={name}")
        except SlurmRejectedError:
            if self._reservation(name) is not None:
                raise

    def requeue(self, job_id: str, reason: str) -> None:
        # scontrol requeue takes no reason; log it so the action stays attributable
        # without overwriting the job's comments (they may carry defrag:nvlink=K).
        job_id = ids.job_id(job_id)
        log.info("requeue job %s: %s", job_id, reason)
        try:
            self.run("scontrol", "requeue", job_id)
        except SlurmRejectedError as exc:
            if "pending" not in str(exc).lower():  # already requeued: idempotent
                raise

    def update_job(self, job_id: str, **fields: str) -> None:
        job_id = ids.job_id(job_id)
        self.run("scontrol", "update", f"JobId={job_id}", *_assignments(fields))

    def update_node(self, node: str, **fields: str) -> None:
        node = ids.node_name(node)
        self.run("scontrol", "update", f"NodeName={node}", *_assignments(fields))

    def _reservation(self, name: str) -> Reservation | None:
        what = f"scontrol show reservation {name}"
        try:
            text = self.run("scontrol", "show", "reservation", name)
        except SlurmRejectedError:
            return None
        found = scontrol_text.reservations(text, what, self._clock())
        return next((r for r in found if r.name == name), None)


def _assignments(fields: dict[str, str]) -> list[str]:
    if not fields:
        raise SlurmRejectedError("nothing to update: give at least one Key=Value")
    bad = sorted(k for k in fields if not _KEY.match(k))
    if bad:
        raise SlurmRejectedError(f"not a Slurm field name: {bad[0]!r}")
    return [f"{k}={v}" for k, v in fields.items()]


def _utc(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def cross_check(json_jobs: Sequence[Job], text_jobs: Sequence[Job]) -> None:
    """Fail if JSON and text disagree on the GPUs of a job running in both reads.

    The two commands run a moment apart; a job that started or ended in between has a
    different state and is skipped. A job cannot be requeued and started again on other
    GPUs in that moment (a requeued job waits at least the credential lifetime).
    """
    text_by_id = {j.id: j for j in text_jobs}
    for job in json_jobs:
        other = text_by_id.get(job.id)
        if other is None or job.state not in HOLDS_GPUS or other.state != job.state:
            continue
        if dict(other.gpus) != dict(job.gpus):
            raise SlurmParseError(
                f"scontrol show job -d: job {job.id}: GPU indices "
                f"{_fmt(other.gpus)} disagree with squeue --json {_fmt(job.gpus)}"
            )


def _fmt(gpus: Any) -> str:
    return ", ".join(f"{n}:{sorted(i)}" for n, i in sorted(gpus.items()))
