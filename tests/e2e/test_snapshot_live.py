"""Live: the cli and rest backends against the compose Slurm cluster (scripts/cluster.sh up).

A course-like fragmented state is made with real ``sbatch --gres=gpu:N -w nodeXX`` jobs in
the slurmctld container, plus a drained node and a node reservation. Then:

* every GPU-holding job's per-node indices in the snapshot equal ``scontrol show job -d``
  (parsed here independently of the adapter's parser);
* the cli snapshot (``docker exec`` prefix) equals the rest snapshot (JWT over HTTP);
* the drained node, the reservation and the pending/held jobs show up;
* CPUs and memory: a job's per-node CPUs/memory and the nodes' CPUTot/CPUAlloc/RealMemory.

Everything created is named ``e2e-snap-<tag>`` and removed afterwards. Other people may use
the cluster at the same time: nodes are chosen among idle, unreserved, undrained ones, and
only this test's objects are asserted on.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import hostlist
import pytest
from live_cluster import config, exclusive_cluster, wait_evaluated

from infra import require
from slurm_defrag.domain.cluster import ClusterSnapshot, JobState, NodeFlag
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.port import NewReservation
from slurm_defrag.slurm.rest import RestSlurm

# newsuite: the cli/rest parity checks are part of what every new Slurm suite runs
pytestmark = [pytest.mark.slurm, pytest.mark.newsuite]

ROOT = Path(__file__).resolve().parents[2]
SUITE = os.environ.get("SLURM_SUITE", "bookworm")
CTLD = f"{os.environ.get('CLUSTER_PREFIX', 'slurmdefrag')}-{SUITE}-slurmctld"
DOCKER = shutil.which("docker", path="/usr/bin:/usr/local/bin") or "/usr/bin/docker"
REST_URL = f"http://127.0.0.1:{os.environ.get('SLURMRESTD_PORT', '6820')}"
GRES_CONF = ROOT / "docker" / "slurm" / "gres.conf"


def ctld(*args: str, check: bool = True) -> str:
    proc = subprocess.run(
        [DOCKER, "exec", CTLD, *args], capture_output=True, text=True, timeout=60, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def cluster_is_up() -> bool:
    if not (ROOT / "scripts" / "cluster.sh").exists() or not Path(DOCKER).exists():
        return False
    try:
        return "UP" in ctld("scontrol", "ping", check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False


@dataclass
class Live:
    tag: str
    cli: CliSlurm
    rest: RestSlurm
    jobs: dict[str, str] = field(default_factory=dict)  # role -> job id
    drained: str = ""
    reservation: str = ""
    reserved_node: str = ""


def indices(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        if part and part != "N/A":
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def scontrol_gpus(job_id: str) -> tuple[str, dict[str, set[int]]]:
    """Job state and per-node GPU indices from ``scontrol show job -d`` (detail lines)."""
    text = ctld("scontrol", "show", "job", "-d", job_id)
    state = re.search(r"JobState=(\S+)", text)
    out: dict[str, set[int]] = {}
    for nodes, idx in re.findall(r"^\s+Nodes=(\S+) .*GRES=\S*?\(IDX:([^)]*)\)", text, re.MULTILINE):
        for node in hostlist.expand_hostlist(nodes):
            if indices(idx):
                out[node] = indices(idx)
    return (state[1] if state else "?"), out


def sbatch(tag: str, role: str, *opts: str) -> str:
    out = ctld(
        "sbatch",
        "--parsable",
        "--requeue",
        "-J",
        f"e2e-snap-{tag}-{role}",
        *opts,
        "--wrap",
        "sleep 600",
    )
    return out.strip().split(";")[0]


def wait_running(job_ids: list[str], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        out = ctld("squeue", "-h", "-j", ",".join(job_ids), "-o", "%i %T")
        states = dict(line.split() for line in out.splitlines() if line.strip())
        if all(states.get(j) == "RUNNING" for j in job_ids):
            return
        time.sleep(2)
    raise AssertionError(f"jobs did not all start within {timeout_s:g} s: {states}")


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    require(cluster_is_up(), "the compose Slurm cluster")
    # Jobs on chosen nodes, a drained node, a reservation: take turns with other live runs.
    with exclusive_cluster():
        yield from scenario()


def scenario() -> Iterator[Live]:
    token = ctld("scontrol", "token", "username=root", "lifespan=1800")
    jwt = token.strip().removeprefix("SLURM_JWT=")
    cli = CliSlurm(SlurmSettings(command_prefix=[DOCKER, "exec", CTLD], gres_conf=GRES_CONF))
    rest = RestSlurm(
        SlurmSettings(backend="rest", rest_url=REST_URL, rest_token=jwt, gres_conf=GRES_CONF)
    )
    ctx = Live(tag=uuid.uuid4().hex[:6], cli=cli, rest=rest)
    before = cli.snapshot()
    free = [n.name for n in before.nodes if n.available and not n.gpus_used and n.gpu_count >= 8]
    others = [n.name for n in before.nodes if n.name not in free[:2] and not n.drained]
    if len(free) < 2 or not others:
        pytest.fail(
            f"need 2 idle unreserved nodes and a third node; state: "
            f"{[(n.name, sorted(n.state), n.reservation) for n in before.nodes]}"
        )
    n1, n2 = free[:2]
    try:
        t = ctx.tag
        ctx.jobs["A"] = sbatch(t, "A", "-w", n1, "--gres=gpu:4")
        ctx.jobs["B"] = sbatch(t, "B", "-w", n1, "--gres=gpu:1")
        ctx.jobs["C"] = sbatch(t, "C", "-w", n2, "--gres=gpu:2")
        ctx.jobs["D"] = sbatch(t, "D", "-w", n2, "--gres=gpu:2")
        ctx.jobs["E"] = sbatch(t, "E", "-N2", "-w", f"{n1},{n2}", "--gres=gpu:2")
        wait_running([ctx.jobs[r] for r in "ABCDE"])
        ctx.jobs["P"] = sbatch(t, "P", "-N1", "-w", n1, "--gres=gpu:8")  # cannot fit: pends
        ctx.jobs["H"] = sbatch(t, "H", "-H", "--gres=gpu:3")  # held
        # Drain and reserve through the cli writer: exercises it live as well.
        ctx.drained = others[0]
        cli.update_node(ctx.drained, State="DRAIN", Reason=f"slurm-defrag e2e {t}")
        ctx.reservation, ctx.reserved_node = f"e2e-snap-{t}", n2
        cli.create_reservation(NewReservation(ctx.reservation, [n2], 900, users=["root"]))
        cli.create_reservation(
            NewReservation(ctx.reservation, [n2], 900, users=["root"])
        )  # idempotent
        wait_evaluated(ctx.jobs["P"])  # the scheduler has evaluated P (Reason=Resources)
        yield ctx
    finally:
        if ctx.jobs:
            ctld("scancel", *ctx.jobs.values(), check=False)
        if ctx.reservation:
            cli.delete_reservation(ctx.reservation)
            cli.delete_reservation(ctx.reservation)  # absent is success
        if ctx.drained:
            cli.update_node(ctx.drained, State="RESUME")


def comparable(s: ClusterSnapshot) -> ClusterSnapshot:
    return s.model_copy(update={"source": "-", "taken_at": EPOCH})


EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def stable_pair(live: Live) -> tuple[ClusterSnapshot, ClusterSnapshot]:
    """cli and rest snapshots of one unchanged state (cli read before and after rest)."""
    for _ in range(5):
        first, rest, second = live.cli.snapshot(), live.rest.snapshot(), live.cli.snapshot()
        if comparable(first) == comparable(second):
            return first, rest
        time.sleep(2)
    diff = _diff(comparable(first), comparable(second))
    raise AssertionError(f"the cluster kept changing between reads; cannot compare: {diff}")


def _diff(a: ClusterSnapshot, b: ClusterSnapshot) -> str:
    da, db = a.model_dump(mode="json"), b.model_dump(mode="json")
    return "; ".join(f"{k}: {da[k]} != {db[k]}" for k in da if da[k] != db[k])[:2000]


def test_job_gpu_indices_equal_scontrol_show_job(live: Live) -> None:
    for snap in (live.cli.snapshot(), live.rest.snapshot()):
        holders = [j for j in snap.jobs if j.holds_gpus]
        assert {live.jobs[r] for r in "ABCDE"} <= {j.id for j in holders}
        mine = {live.jobs[r] for r in "ABCDE"}
        for job in holders:
            state, expected = scontrol_gpus(job.id)
            if job.id not in mine and state != job.state:
                continue  # another user's job ended or moved since the snapshot
            assert state == job.state, (snap.source, job.id)
            assert {n: set(i) for n, i in job.gpus.items()} == expected, (snap.source, job.id)
        by_id = snap.job_by_id
        assert sum(len(i) for i in by_id[live.jobs["A"]].gpus.values()) == 4
        assert len(by_id[live.jobs["E"]].gpus) == 2
        for node in snap.nodes:  # node GresUsed = union of the jobs on it
            held = set().union(*(j.gpus.get(node.name, set()) for j in holders))
            assert set(node.gpus_used) == held, node.name


def test_cli_and_rest_snapshots_are_equal(live: Live) -> None:
    cli, rest = stable_pair(live)
    assert (cli.source, rest.source) == ("cli", "rest")
    assert comparable(cli) == comparable(rest), _diff(comparable(cli), comparable(rest))


def test_drain_reservation_and_pending_jobs_show_up(live: Live) -> None:
    for snap in (live.cli.snapshot(), live.rest.snapshot()):
        drained = snap.node_by_name[live.drained]
        assert NodeFlag.DRAIN in drained.state, snap.source
        assert drained.reason == f"slurm-defrag e2e {live.tag}", snap.source
        resv = next(r for r in snap.reservations if r.name == live.reservation)
        assert resv.nodes == (live.reserved_node,)
        assert resv.state == "ACTIVE"
        assert "IGNORE_JOBS" in resv.flags
        assert snap.node_by_name[live.reserved_node].reservation == live.reservation
        pending, held = snap.job_by_id[live.jobs["P"]], snap.job_by_id[live.jobs["H"]]
        assert pending.state == held.state == JobState.PENDING
        assert held.reason in ("JobHeldUser", "JobHeldAdmin")  # sbatch -H: user hold
        assert pending.request is not None
        assert (pending.request.nodes, pending.request.gpus_per_node) == (1, 8)
        assert held.request is not None
        assert held.request.gpus_per_node == 3
        assert snap.topology_of(drained).max_block >= 2  # gres.conf Links= were read


def scontrol_node(name: str) -> dict[str, int]:
    """CPUEfctv, CPUAlloc, RealMemory of a node, read here independently of the adapter."""
    text = ctld("scontrol", "show", "node", name)
    return {k: int(v) for k, v in re.findall(r"\b(CPUEfctv|CPUAlloc|RealMemory)=(\d+)", text)}


def test_cpus_and_memory_are_filled(live: Live) -> None:
    """``sbatch -c 2 --mem=1G``: the running job holds 2 CPUs on its node, and 1 GB where
    Slurm allocates memory (``CR_*_Memory``; the compose cluster's ``CR_Core`` allocates
    none, ``Mem=0``). A held ``-c 3 --mem-per-cpu=1G`` job needs 3 CPUs and 3 GB per node,
    a held ``--cpus-per-gpu=4 --mem-per-gpu=2G --gres=gpu:2`` one 8 CPUs and 4 GB. Nodes
    carry their CPUs and memory as scontrol shows them."""
    memory_allocated = "MEMORY" in config().get("SelectTypeParameters", "").upper()
    running = sbatch(live.tag, "cpu", "-c", "2", "--mem=1G", "--gres=gpu:1")
    held = sbatch(live.tag, "cpuheld", "-H", "-N1", "-c", "3", "--mem-per-cpu=1G", "--gres=gpu:1")
    per_gpu = sbatch(
        live.tag, "gpuheld", "-H", "--cpus-per-gpu=4", "--mem-per-gpu=2G", "--gres=gpu:2"
    )
    # the fixture cancels them if we fail
    live.jobs.update(cpu=running, cpuheld=held, gpuheld=per_gpu)
    try:
        wait_running([running])
        for snap in (live.cli.snapshot(), live.rest.snapshot()):
            job = snap.job_by_id[running]
            assert (job.cpus_per_node, job.memory_mb_per_node) == (
                2,
                1024 if memory_allocated else 0,
            ), snap.source
            need = snap.job_by_id[held]
            assert (need.cpus_per_node, need.memory_mb_per_node) == (3, 3072), snap.source
            need = snap.job_by_id[per_gpu]
            assert (need.cpus_per_node, need.memory_mb_per_node) == (8, 4096), snap.source
            (name,) = job.gpus
            node, shown = snap.node_by_name[name], scontrol_node(name)
            assert (node.cpus, node.memory_mb) == (shown["CPUEfctv"], shown["RealMemory"])
            assert 2 <= node.cpus_alloc <= node.cpus, snap.source  # others' jobs may come
            assert (node.memory_alloc_mb >= 1024) == memory_allocated, snap.source
            assert all(n.cpus for n in snap.nodes), snap.source
    finally:
        ctld("scancel", running, held, per_gpu, check=False)


def test_cli_writer_requeue_frees_the_gpus(live: Live) -> None:
    """Last: it changes the state the tests above read."""
    job_id = live.jobs["B"]
    before = live.cli.snapshot().job_by_id[job_id]
    assert before.holds_gpus
    live.cli.requeue(job_id, f"slurm-defrag:e2e-{live.tag}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        after = live.cli.snapshot().job_by_id[job_id]
        if after.state == JobState.PENDING:
            break
        time.sleep(1)
    assert after.state == JobState.PENDING
    assert not after.gpus
    assert after.request is not None
    assert after.request.gpus_per_node == 1
    live.cli.requeue(job_id, f"slurm-defrag:e2e-{live.tag}")  # already pending: idempotent
