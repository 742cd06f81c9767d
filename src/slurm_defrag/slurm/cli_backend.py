"""The ``cli`` backend: scontrol, squeue and sinfo, ``--json`` where it exists.

What is read, per Slurm release (detected once from ``scontrol --version``):

=============  ===============================  =================================
object         Slurm 23.02+ (recorded: 24.11)   Slurm 21.08-22.05 (recorded: 22.05)
=============  ===============================  =================================
jobs           ``squeue --json``                ``squeue --json``
nodes          ``scontrol show nodes --json``   ``sinfo --json`` (one entry per node)
partitions     ``scontrol show partitions --json``  ``scontrol show partition`` (text)
reservations   ``scontrol show reservations --json``  ``scontrol show reservation`` (text)
NVLink         ``scontrol show topology`` (text),  none (no topology/block before
domains        only with topology/block            23.11; not asked)
=============  ===============================  =================================

(24.11's ``sinfo --json`` groups nodes, so it is not used there.) NVLink domains: from
23.11 ``scontrol show config`` is read once for ``TopologyPlugin``; when it is
``topology/block``, every snapshot reads ``scontrol show topology`` and each
``BlockName=`` line becomes a domain (:mod:`slurm_defrag.slurm.discovery.topology_block`; no JSON
of 24.11 shows blocks). When a ``--json`` command
is refused (older Slurm, no JSON serializer plugin) the ``scontrol show`` text is read
instead. With ``cross_check_text`` on, ``scontrol show job -d`` is read as well and every
running job's per-node GPU indices must agree with the JSON.

Job text is hostile input. ``scontrol show job -d`` prints values verbatim - the job name
unquoted at the end of the first line, comments and paths with spaces, ``Key=`` and
newlines (22.05 and 24.11 take all of them from ``sbatch -J/--comment/--chdir``) - so a
job owner can write text that reads like fields of their record, or like whole records of
other jobs. The JSON escapes strings and is the source of truth wherever it exists; the
text is read with :func:`scontrol_text.job_records` (lines in Slurm's order, keys once,
required lines present, one record per JobId) and only what survives is used:

* **cross-check** (JSON read): a record is compared only if it has no problems *and* its
  job name, comment and admin comment equal the JSON's for that job; any other record is
  skipped with one warning naming the job (an attacker can make their own job, or one
  whose id they forge, unverifiable - never fail the cycle). A real disagreement on a
  verifiable record still fails: that is an adapter or Slurm bug.
* **fallback** (``squeue --json`` refused): besides the structure, each record must be
  exactly one line of ``scontrol show job -d -o`` (:func:`scontrol_text.check_one_liners`):
  that proves no value of it holds a newline, which is the one forgery the structure alone
  cannot see (``--chdir $'/x\n   AdminComment=defrag:protect'`` on a job without an admin
  comment prints exactly like a real one). The ids of records that fail are intersected
  with ``squeue --noheader --format=%A`` (numbers only: nothing a user controls) and
  re-read one by one (``scontrol show job -d <id>`` and ``-o <id>``: that job alone, so no
  other job's values are in it); a job that still does not read cleanly is left out with a
  warning. It is then never requeued, and its GPUs stay busy through the nodes' GresUsed
  ("busy, job not visible" on the map).

Whichever is read, a job record whose fields do not read (a request Slurm holds but no
parser knows, ``--gres=gpu:abc:xyz:1``) costs that job, not the read: it is kept out of
planning, or left out (:mod:`slurm_defrag.slurm.parse.records`, issue #40).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from slurm_defrag.domain.cluster import (
    HOLDS_GPUS,
    ClusterSnapshot,
    Job,
    NvlinkDomain,
    RecordPart,
    Reservation,
    record_reason,
)
from slurm_defrag.slurm import ids, scontrol_argv
from slurm_defrag.slurm.command_runner import Runner, run, run_capture, subprocess_runner
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.discovery import topology_block
from slurm_defrag.slurm.discovery.topology_sources import GresConfText
from slurm_defrag.slurm.failures import SlurmParseError, SlurmRejectedError
from slurm_defrag.slurm.parse import openapi, scontrol_text
from slurm_defrag.slurm.parse.mapping import Doc, show
from slurm_defrag.slurm.parse.records import JobsRead
from slurm_defrag.slurm.port import NewReservation, SlurmWriter
from slurm_defrag.slurm.snapshot_assembly import Parts, assemble

log = logging.getLogger(__name__)
CONFIG_TTL_S = 600.0
"""How long a read of ``scontrol show config`` is trusted (one command per 10 minutes)."""

JSON_SCONTROL_SINCE = (23, 2)
"""First release with ``scontrol show ... --json``."""

REREAD_MAX = 100
"""Doubtful job records re-read one by one per text snapshot (two commands each); the rest
are left out (with the warning) so hostile jobs cannot make a snapshot arbitrarily slow."""

_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_TEXT_CMD = ("scontrol", "show", "job", "-d")
_TEXT_WHERE = " ".join(_TEXT_CMD)


class CliSlurm(SlurmWriter):
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
        self._topology_plugin: str | None = None
        self._conf_dir: str | None = None
        self._config_text: str | None = None
        self._config_read_at: float = 0.0

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
        except (ValueError, RecursionError):
            # an integer of over 4,300 digits (ValueError), or nested deeper than the
            # parser recurses: not Slurm's JSON either
            raise SlurmParseError(
                f"{what}: output is not JSON (number too long or nested too deep)"
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
        domains = self._nvlink_domains()
        parts = Parts(nodes, jobs.jobs, partitions, reservations, cluster, domains, jobs.left_out)
        return assemble(
            parts,
            source=self.name,
            taken_at=taken_at,
            settings=self.settings,
            where="cli",
            gres_conf=self.discovered_gres_conf(),
        )

    def show_config(self) -> str:
        """``scontrol show config``, re-read every :data:`CONFIG_TTL_S`: the topology plugin
        and the config directory come from it. They change only with a slurmctld restart,
        which a long-running service must still notice (a switch to topology/block would
        otherwise go unseen, and multi-node NVLink jobs be planned across racks)."""
        now = time.monotonic()
        if self._config_text is None or now - self._config_read_at >= CONFIG_TTL_S:
            text = self.run("scontrol", "show", "config")
            if text != self._config_text:
                self._topology_plugin = None
                self._conf_dir = None
            self._config_text, self._config_read_at = text, now
        return self._config_text

    def _config_stale(self) -> bool:
        return time.monotonic() - self._config_read_at >= CONFIG_TTL_S

    def topology_plugin(self) -> str:
        """``TopologyPlugin`` of ``scontrol show config`` (as fresh as :meth:`show_config`)."""
        config = self.show_config()  # a changed config clears the value below
        if self._topology_plugin is None:
            self._topology_plugin = topology_block.topology_plugin(config) or ""
        return self._topology_plugin

    def _nvlink_domains(self) -> tuple[NvlinkDomain, ...]:
        """topology/block blocks (``scontrol show topology``); none for other plugins.

        Releases before 23.11 have no topology/block and are not asked at all; the plugin
        is read once per backend (changing it needs a slurmctld restart; restart
        slurm-defrag too, as after a Slurm upgrade).
        """
        if self.settings.topology_conf is not None:  # read by assemble() instead
            return ()
        if self.version() < topology_block.BLOCK_SINCE:
            return ()
        if self.topology_plugin() != topology_block.BLOCK_PLUGIN:
            return ()
        return topology_block.nvlink_domains(self.run("scontrol", "show", "topology"))

    def discovered_gres_conf(self) -> GresConfText | None:
        """The gres.conf beside Slurm's slurm.conf, read where scontrol runs, or None.

        Only when ``gres_conf`` is not set and ``discover_gres_conf`` is on. The directory
        comes from ``scontrol show config`` (``SLURM_CONF = /etc/slurm/slurm.conf``) and is
        cached; the file is read each snapshot (``cat``, through ``command_prefix``, so a
        ``docker exec`` prefix reads the container's file). No file there (``cat`` fails)
        is not an error: Slurm needs no gres.conf, the nodes are then simply not covered.
        """
        s = self.settings
        if s.gres_conf is not None or not s.discover_gres_conf:
            return None
        if self._conf_dir is None or self._config_stale():
            try:
                self._conf_dir = slurm_conf_dir(self.show_config())
            except (SlurmParseError, SlurmRejectedError) as exc:
                # The snapshot itself is still good: its GPU nodes just show as unknown
                # (and say so), which is better than failing every cycle over a hint.
                log.warning("%s; not looking for gres.conf beside slurm.conf", exc)
                return None
        path = f"{self._conf_dir}/gres.conf"
        try:
            text = self.run("cat", "--", path)
        except SlurmRejectedError as exc:
            log.info("no gres.conf read beside slurm.conf (%s); no topology from it", exc)
            return None
        return GresConfText(f"{path} (found beside SLURM_CONF)", text)

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

    def _jobs(self) -> tuple[JobsRead, str | None]:
        try:
            out = self.run("squeue", "--json")
        except SlurmRejectedError as exc:
            log.warning("%s; reading %s text instead", exc, _TEXT_WHERE)
            return self._text_jobs(), None
        data = self.decode(out, "squeue --json")
        fam = openapi.family(data, "squeue --json")
        doc = Doc(data, "squeue --json", "")
        jobs = fam.read_jobs(doc)
        if self.settings.cross_check_text:
            cross_check(jobs.jobs, scontrol_text.job_records(self.run(*_TEXT_CMD)))
        return jobs, fam.cluster(doc)

    def _text_jobs(self) -> JobsRead:
        """Jobs from ``scontrol show job -d`` text alone (see the module docstring)."""
        records = scontrol_text.job_records(self.run(*_TEXT_CMD))
        scontrol_text.check_one_liners(records, self.run(*_TEXT_CMD, "-o"))
        good = [r for r in records if not r.problems]
        # (A forged copy of a job's record gives the real one a problem too: same JobId.)
        doubtful = {r.job_id: r.problems[0] for r in records if r.problems}
        left_out: list[str] = []
        if doubtful:
            good += self._reread(doubtful, left_out)
        out = scontrol_text.read_jobs(good, _TEXT_WHERE)
        out.left_out += left_out
        return out

    def _reread(
        self, doubtful: dict[str, str], left_out: list[str]
    ) -> list[scontrol_text.JobRecord]:
        """Re-read each doubtful job alone; the ones that read cleanly. The reasons of the
        others go to ``left_out`` (the snapshot's warning says it, once)."""
        listed = set(
            self.run("squeue", "--noheader", "--all", "--states=all", "--format=%A").split()
        )
        out = []
        budget = REREAD_MAX
        for job_id, problem in sorted(doubtful.items(), key=lambda kv: (len(kv[0]), kv[0])):
            if job_id not in listed:  # no such job (made up), or it ended meanwhile
                # (a made-up id is a user's text: shown bounded and escaped)
                shown = job_id if job_id.isascii() and job_id.isdigit() else show(job_id)
                log.warning(
                    "%s: ignoring a record of JobId=%s that squeue does not list (%s)",
                    _TEXT_WHERE,
                    shown[:40],
                    problem,
                )
                continue
            budget -= 1
            record = self._read_one(ids.job_id(job_id)) if budget >= 0 else None
            if record is None:
                why = f"job {job_id} left out: its record cannot be read unambiguously ({problem})"
                left_out.append(record_reason(RecordPart.RECORD, f"{_TEXT_WHERE}: {why}"))
            else:
                out.append(record)
        return out

    def _read_one(self, job_id: str) -> scontrol_text.JobRecord | None:
        try:
            text = self.run(*_TEXT_CMD, job_id)
            one_liner = self.run(*_TEXT_CMD, "-o", job_id)
        except SlurmRejectedError:  # ended meanwhile: "Invalid job id specified"
            return None
        # An array's or heterogeneous job's leader id lists its other records too.
        records = [r for r in scontrol_text.job_records(text) if r.job_id == job_id]
        scontrol_text.check_one_liners(records, one_liner)
        if len(records) != 1 or records[0].problems:
            return None
        return records[0]

    # -- writer ------------------------------------------------------------------------

    def create_reservation(self, r: NewReservation) -> None:
        r = r.checked()
        name, nodes = r.name, r.nodes
        args = scontrol_argv.create_reservation(r)
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
            self.run(*scontrol_argv.delete_reservation(name))
        except SlurmRejectedError:
            if self._reservation(name) is not None:
                raise

    def requeue(self, job_id: str, reason: str) -> None:
        # scontrol requeue takes no reason; log it so the action stays attributable
        # without overwriting the job's comments (they may carry defrag:nvlink=K).
        job_id = ids.job_id(job_id)
        log.info("requeue job %s: %s", job_id, reason)
        try:
            self.run(*scontrol_argv.requeue(job_id, reason))
        except SlurmRejectedError as exc:
            if "pending" not in str(exc).lower():  # already requeued: idempotent
                raise

    def update_job(self, job_id: str, **fields: str) -> None:
        job_id = ids.job_id(job_id)
        self.run(*scontrol_argv.update_job(job_id, **_checked(fields)))

    def update_node(self, node: str, **fields: str) -> None:
        node = ids.node_name(node)
        self.run(*scontrol_argv.update_node(node, **_checked(fields)))

    def _reservation(self, name: str) -> Reservation | None:
        what = f"scontrol show reservation {name}"
        try:
            text = self.run("scontrol", "show", "reservation", name)
        except SlurmRejectedError:
            return None
        found = scontrol_text.reservations(text, what, self._clock())
        return next((r for r in found if r.name == name), None)


def _checked(fields: dict[str, str]) -> dict[str, str]:
    if not fields:
        raise SlurmRejectedError("nothing to update: give at least one Key=Value")
    bad = sorted(k for k in fields if not _KEY.match(k))
    if bad:
        raise SlurmRejectedError(f"not a Slurm field name: {bad[0]!r}")
    return fields


_SLURM_CONF_LINE = re.compile(r"^SLURM_CONF\s*=\s*(\S+)\s*$", re.MULTILINE)


def slurm_conf_dir(config_text: str) -> str:
    """The directory of ``SLURM_CONF`` in ``scontrol show config`` output.

    It must be an absolute path of plain characters: it becomes an argument of ``cat``.
    """
    match = _SLURM_CONF_LINE.search(config_text)
    if match is None:
        raise SlurmParseError("scontrol show config: no SLURM_CONF line")
    conf = match[1]
    if not re.fullmatch(r"/[A-Za-z0-9_./+-]*", conf) or "/../" in conf + "/":
        raise SlurmParseError(f"scontrol show config: SLURM_CONF {conf[:80]!r}: not a plain path")
    return conf.rsplit("/", 1)[0] or "/"


def cross_check(json_jobs: Sequence[Job], records: Sequence[scontrol_text.JobRecord]) -> None:
    """Fail if JSON and text disagree on the GPUs of a job running in both reads.

    Only text records without problems whose user-controlled strings (job name, comment,
    admin comment) equal the JSON's are compared; the others are skipped with a warning
    naming the job. Only the fields a job owner cannot reach from a value are read from
    the record: the first line's ids, the state and the ``Nodes=`` detail lines (all
    printed before the first free-text value but the name, which ends the first line).

    The two commands run a moment apart; a job that started or ended in between has a
    different state and is skipped. A job cannot be requeued and started again on other
    GPUs in that moment (a requeued job waits at least the credential lifetime).

    A job that either read cannot fully understand (``Job.unreadable`` in the JSON, a text
    field that does not parse) is skipped too: it is out of planning already, and one
    user's record must not fail the read (issue #40).
    """
    by_json = {j.id: j for j in json_jobs}
    warned: set[str] = set()

    def skip(job_id: str, why: str) -> None:
        if job_id not in warned:  # one line per job, however many forged copies
            warned.add(job_id)
            log.warning("%s: job %s not cross-checked: %s", _TEXT_WHERE, job_id, why)

    for i, r in enumerate(records):
        if r.problems:
            skip(r.job_id, r.problems[0])
            continue
        try:
            _compare(r, f"jobs[{i}]", by_json)
        except _Unverifiable as exc:
            skip(exc.job_id, str(exc))


class _Unverifiable(Exception):
    """A text record that cannot be compared (not a disagreement: skipped)."""

    def __init__(self, job_id: str, why: str) -> None:
        super().__init__(why)
        self.job_id = job_id


def _compare(r: scontrol_text.JobRecord, path: str, by_json: Mapping[str, Job]) -> None:
    try:
        state = scontrol_text.job_state(r, _TEXT_WHERE, path)
        if state not in HOLDS_GPUS:
            return
        job_id = scontrol_text.display_id(r, _TEXT_WHERE, path)
    except SlurmParseError as exc:
        raise _Unverifiable(r.job_id, str(exc)) from None
    job = by_json.get(job_id)
    if job is None or job.state != state or job.unreadable:
        return
    differs = _differing_string(r, job)
    if differs is not None:
        why = f"its {differs} differs from squeue --json (a value that reads like fields)"
        raise _Unverifiable(job_id, why)
    try:
        gpus = scontrol_text.job_gpus(r, _TEXT_WHERE, path)
        shards = scontrol_text.job_shards(r, _TEXT_WHERE, path)
    except SlurmParseError as exc:
        raise _Unverifiable(job_id, str(exc)) from None
    if gpus != dict(job.gpus):
        raise SlurmParseError(
            f"scontrol show job -d: job {job.id}: GPU indices "
            f"{_fmt(gpus)} disagree with squeue --json {_fmt(job.gpus)}"
        )
    if shards != job.shard_use:
        raise SlurmParseError(
            f"scontrol show job -d: job {job.id}: shards {shards} disagree with "
            f"squeue --json {job.shard_use}"
        )


def _differing_string(r: scontrol_text.JobRecord, job: Job) -> str | None:
    for key, value in (
        ("JobName", job.name),
        ("Comment", job.comment),
        ("AdminComment", job.admin_comment),
    ):
        if scontrol_text.text_value(r, key) != value:
            return key
    return None


def _fmt(gpus: Any) -> str:
    return ", ".join(f"{n}:{sorted(i)}" for n, i in sorted(gpus.items()))
