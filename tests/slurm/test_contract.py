"""One contract, every backend: the recorded cluster state reads back exactly.

Expected values are the README's tables (shared/slurm-recordings/README.md): per job, the
GPU indices on each node; per node, ``GresUsed`` IDX, state and reservation.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from slurm_defrag.domain.cluster import ClusterSnapshot, JobState, NodeFlag
from slurm_defrag.slurm.fake import FakeSlurm

R = set(range(8))
JOB_GPUS = {
    "1": {"node01": {0, 1, 2, 3}},
    "2": {"node01": {4}},
    "3": {"node02": {0, 1}},
    "4": {"node02": {4, 5}},
    "5": {"node03": {0}},
    "6": {"node03": {4, 5, 6}},
    "7": {"node04": R},
    "8": {"node05": {0, 1}, "node06": {0, 1}},
    "9": {},
    "10": {},
}
NODE_USED = {
    "node01": {0, 1, 2, 3, 4},
    "node02": {0, 1, 4, 5},
    "node03": {0, 4, 5, 6},
    "node04": R,
    "node05": {0, 1},
    "node06": {0, 1},
    "node07": set(),
    "node08": set(),
}
# (nodes, GPUs per node, model) asked for; the held job and the 8-GPU one are pending.
REQUESTS = {
    "1": (1, 4, None),
    "2": (1, 1, None),
    "3": (1, 2, None),
    "4": (1, 2, "a100"),
    "5": (1, 1, None),
    "6": (1, 3, "a100-80g"),
    "7": (1, 8, None),
    "8": (2, 2, None),
    "9": (1, 8, None),
    "10": (1, 3, None),
}

# CPUAlloc per node: every recorded job holds one CPU on each of its nodes.
NODE_CPUS_ALLOC = {
    "node01": 2,
    "node02": 2,
    "node03": 2,
    "node04": 1,
    "node05": 1,
    "node06": 1,
    "node07": 0,
    "node08": 0,
}

TEXT_ONLY = {  # Slurm without JSON: every --json command is refused
    "squeue --json": (1, "", "squeue: unrecognized option '--json'"),
    "sinfo --json": (1, "", "sinfo: unrecognized option '--json'"),
    "scontrol show nodes --json": (1, "", "scontrol: unrecognized option '--json'"),
    "scontrol show partitions --json": (1, "", "scontrol: unrecognized option '--json'"),
    "scontrol show reservations --json": (1, "", "scontrol: unrecognized option '--json'"),
}

CASES = [
    ("cli", "22.05"),
    ("rest", "22.05"),
    ("cli-text", "22.05"),
    ("fake", "22.05"),
    ("cli", "24.11"),
    ("rest", "24.11"),
    ("cli-text", "24.11"),
    ("fake", "24.11"),
    ("pyslurm", "24.11"),
    ("cli", "26.05"),
    ("rest", "26.05"),
    ("cli-text", "26.05"),
    ("fake", "26.05"),
]


def read(recordings: SimpleNamespace, backend: str, version: str) -> ClusterSnapshot:
    if backend == "cli":
        return recordings.cli(version).snapshot()  # type: ignore[no-any-return]
    if backend == "cli-text":
        runner = recordings.ReplayRunner(version, TEXT_ONLY)
        # scontrol text never names the cluster; the cluster_name setting does then.
        backend_ = recordings.cli(version, runner, cluster_name="fakegpu")
        return backend_.snapshot()  # type: ignore[no-any-return]
    if backend == "rest":
        return recordings.rest(version).snapshot()  # type: ignore[no-any-return]
    if backend == "pyslurm":
        return recordings.pyslurm(version).snapshot()  # type: ignore[no-any-return]
    seed = recordings.cli(version).snapshot()
    return FakeSlurm(seed, clock=lambda: recordings.taken_at[version]).snapshot()


@pytest.fixture(params=CASES, ids=[f"{b}-{v}" for b, v in CASES])
def snap(request: pytest.FixtureRequest, recordings: SimpleNamespace) -> ClusterSnapshot:
    backend, version = request.param
    return read(recordings, backend, version)


def test_every_job_has_exactly_the_recorded_gpu_indices(snap: ClusterSnapshot) -> None:
    got = {j.id: {n: set(i) for n, i in j.gpus.items()} for j in snap.jobs}
    assert got == JOB_GPUS


def test_every_node_reports_exactly_the_recorded_busy_gpus(snap: ClusterSnapshot) -> None:
    assert {n.name: set(n.gpus_used) for n in snap.nodes} == NODE_USED


def test_node_inventory_and_states(snap: ClusterSnapshot) -> None:
    nodes = snap.node_by_name
    assert all(n.gpu_count == 8 for n in snap.nodes)
    assert nodes["node03"].gpu_model == "a100-80g"
    assert nodes["node03"].gpu_memory_gb == 80.0
    assert nodes["node01"].gpu_model == "a100"
    assert nodes["node07"].state == {NodeFlag.IDLE, NodeFlag.DRAIN}
    assert nodes["node07"].drained
    assert nodes["node07"].reason == "demo: GPU maintenance"
    assert nodes["node08"].state == {NodeFlag.IDLE, NodeFlag.RESERVED}
    assert nodes["node08"].reservation == "defrag-demo"
    assert all(nodes[f"node0{i}"].state == {NodeFlag.MIXED} for i in range(1, 7))
    assert all(n.partitions == ("batch", "high") for n in snap.nodes)


def test_host_cpus_and_memory(snap: ClusterSnapshot) -> None:
    """2x16 cores, RealMemory=512000; CR_Core allocates no memory (Mem=0, AllocMem=0)."""
    nodes = {n.name: (n.cpus, n.cpus_alloc, n.memory_mb, n.memory_alloc_mb) for n in snap.nodes}
    assert nodes == {name: (32, alloc, 512000, 0) for name, alloc in NODE_CPUS_ALLOC.items()}
    # running: one CPU held per node (job 8 on each of its two); pending: MinCPUsNode=1,
    # MinMemoryNode=0 (no --mem: unknown)
    assert {j.id: (j.cpus_per_node, j.memory_mb_per_node) for j in snap.jobs} == {
        str(i): (1, 0) for i in range(1, 11)
    }


def test_reservation_and_partitions(snap: ClusterSnapshot) -> None:
    (resv,) = snap.reservations
    assert resv.name == "defrag-demo"
    assert resv.nodes == ("node08",)
    assert resv.users == ("root",)
    assert resv.state == "ACTIVE"
    assert set(resv.flags) >= {"IGNORE_JOBS", "SPEC_NODES"}
    assert resv.end_time is not None
    assert resv.start_time is not None
    assert (resv.end_time - resv.start_time).total_seconds() == 86400
    assert [(p.name, p.priority_tier) for p in snap.partitions] == [("batch", 1), ("high", 10)]
    assert all(p.nodes == tuple(f"node0{i}" for i in range(1, 9)) for p in snap.partitions)


def test_jobs_states_requests_and_topology(snap: ClusterSnapshot) -> None:
    jobs = snap.job_by_id
    assert {j.id for j in snap.jobs if j.state == JobState.RUNNING} == {str(i) for i in range(1, 9)}
    assert (jobs["9"].state, jobs["9"].reason) == (JobState.PENDING, "Resources")
    assert (jobs["10"].state, jobs["10"].reason) == (JobState.PENDING, "JobHeldAdmin")
    for job_id, (nodes, per_node, model) in REQUESTS.items():
        req = jobs[job_id].request
        assert req is not None, job_id
        assert (req.nodes, req.gpus_per_node, req.gpu_model) == (nodes, per_node, model), job_id
        # no defrag:nvlink= comment: NVLink assumed for 2..8 GPUs per node
        assert req.nvlink == (per_node > 1), job_id
    assert all(j.requeue for j in snap.jobs)
    assert jobs["1"].name == "jobA"
    assert jobs["1"].user == "root"
    assert jobs["1"].time_limit_s == 365 * 86400
    assert jobs["9"].time_limit_s is None
    assert jobs["1"].start_time is not None
    assert jobs["9"].start_time is None
    # job 9's StartTime is slurmctld's plan: when the running jobs' 365-day limits end;
    # held job 10 has none (StartTime=Unknown, start_time 0 or null)
    planned = jobs["9"].planned_start
    assert planned is not None
    assert jobs["9"].submit_time is not None
    assert 364 <= (planned - jobs["9"].submit_time).days <= 365
    assert jobs["10"].planned_start is None
    assert all(j.planned_start is None for j in snap.jobs if j.state != JobState.PENDING)
    # gres.conf Links=: every pair linked, so all 8 GPUs form one NVLink block
    assert snap.cluster == "fakegpu"
    for node in snap.nodes:
        assert snap.topology_of(node).max_block == 8


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_cli_and_rest_snapshots_are_equal(recordings: SimpleNamespace, version: str) -> None:
    cli = recordings.cli(version).snapshot()
    rest = recordings.rest(version).snapshot()
    assert cli.source == "cli"
    assert rest.source == "rest"
    assert cli.model_copy(update={"source": "x"}) == rest.model_copy(update={"source": "x"})


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_text_fallback_equals_json(recordings: SimpleNamespace, version: str) -> None:
    """scontrol text alone gives the same snapshot (24.11: minus PreemptMode, which its
    JSON lacks and its text has; 26.05's data_parser v0.0.45 has it again)."""
    json_snap = read(recordings, "cli", version)
    text_snap = read(recordings, "cli-text", version)
    if version == "24.11":
        text_snap = text_snap.model_copy(update={"partitions": json_snap.partitions})
    assert text_snap == json_snap


def test_pyslurm_mapping_equals_rest_except_unreported_fields(
    recordings: SimpleNamespace,
) -> None:
    """pyslurm 24.11 sees the same cluster; it reports PreemptMode (JSON does not) and a
    job's comment as None, which maps to the same empty string."""
    rest = recordings.rest("24.11").snapshot()
    py = recordings.pyslurm("24.11").snapshot()
    assert [p.preempt_mode for p in py.partitions] == ["REQUEUE", "OFF"]
    py = py.model_copy(update={"source": "rest", "partitions": rest.partitions})
    assert py == rest


@pytest.mark.parametrize("backend", ["cli", "rest"])
def test_26_05_json_reports_partition_preempt_mode(
    recordings: SimpleNamespace, backend: str
) -> None:
    """data_parser v0.0.45 (Slurm 26.05) has ``preempt_mode`` again (v0.0.42 had none):
    ``["REQUEUE"]`` and ``["DISABLED"]``, the text's REQUEUE and OFF."""
    snap = read(recordings, backend, "26.05")
    assert [p.preempt_mode for p in snap.partitions] == ["REQUEUE", "OFF"]
