"""CPUs and memory of nodes and jobs, read from recorded Slurm output with values changed.

The recordings themselves (every job one CPU, ``CR_Core`` so ``Mem=0``) are checked for
every backend in ``test_contract.py``; here each spelling is edited to carry real
allocations and requests: scontrol text, the v0.0.38 and v0.0.42 JSON, pyslurm layouts.
Next to each adapter's pending-job request: the pending job's planned start (Slurm's
start time of a pending job) and the spellings of "no plan".
"""

from __future__ import annotations

import inspect
import json
import re
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from slurm_defrag.domain.cluster import GpuRequest, Job, JobState, Node
from slurm_defrag.slurm.failures import SlurmParseError
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.slurm.parse import cpu_memory, openapi, scontrol_text
from slurm_defrag.slurm.parse.mapping import Doc
from slurm_defrag.slurm.pyslurm_adapter import job as pyslurm_job
from slurm_defrag.slurm.pyslurm_adapter import layout_host

VERSIONS = ("22.05", "24.11")
# Job 9 (pending, Resources) as recorded: StartTime / start_time is slurmctld's plan, the
# end of the running jobs' 365-day limits. Held job 10 has StartTime=Unknown (JSON: 0).
PLANNED_9 = {
    "22.05": datetime(2027, 11, 29, 15, 13, 23, tzinfo=UTC),
    "24.11": datetime(2027, 11, 29, 15, 14, 3, tzinfo=UTC),
}
SOON = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)


def text_record(recordings: SimpleNamespace, version: str, file: str, first: str) -> str:
    """The record of ``scontrol show ...`` text that starts with ``first`` (``JobId=8 ``)."""
    text = recordings.text(version, file)
    start = text.index(first)
    end = text.find("\n\n", start)
    return text[start : end if end >= 0 else None]


def text_job(recordings: SimpleNamespace, version: str, job_id: str, **subs: str) -> Job:
    """Job ``job_id`` from ``scontrol show job -d``, with ``Key=value`` replaced."""
    record = text_record(recordings, version, "scontrol_show_job_-d.txt", f"JobId={job_id} ")
    for key, value in subs.items():
        record = re.sub(rf"\b{re.escape(key)}=\S*", f"{key}={value}", record)
    (job,) = scontrol_text.jobs(record, "scontrol show job -d")
    return job


def json_jobs(recordings: SimpleNamespace, version: str, edit: Any) -> dict[str, Job]:
    """``squeue --json`` after ``edit(jobs_by_id)`` changed it, mapped."""
    path = recordings.dir(version) / "squeue_--json.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    edit({str(j["job_id"]): j for j in data["jobs"]})
    fam = openapi.family(data, "squeue --json")
    return {j.id: j for j in fam.jobs(Doc(data, "squeue --json", ""))}


def host_of(job: Job) -> tuple[int, int]:
    return job.cpus_per_node, job.memory_mb_per_node


# -- scontrol text ---------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_text_running_job_holds_the_smallest_allocation_of_its_nodes(
    recordings: SimpleNamespace, version: str
) -> None:
    record = text_record(recordings, version, "scontrol_show_job_-d.txt", "JobId=8 ")
    folded = "     Nodes=node[05-06] CPU_IDs=0 Mem=0 GRES=gpu:a100:2(IDX:0-1)"
    assert folded in record
    split = (
        "     Nodes=node05 CPU_IDs=0-3 Mem=4096 GRES=gpu:a100:2(IDX:0-1)\n"
        "     Nodes=node06 CPU_IDs=0-1,8 Mem=2G GRES=gpu:a100:2(IDX:0-1)"
    )
    (job,) = scontrol_text.jobs(record.replace(folded, split), "scontrol show job -d")
    # 4 and 3 CPUs, 4096 and 2048 MB: requeueing it frees at least 3 CPUs and 2 GB anywhere
    assert host_of(job) == (3, 2048)
    assert dict(job.gpus) == {"node05": {0, 1}, "node06": {0, 1}}
    folded_big = folded.replace("CPU_IDs=0 Mem=0", "CPU_IDs=0-7 Mem=16384")
    (job,) = scontrol_text.jobs(record.replace(folded, folded_big), "scontrol show job -d")
    assert host_of(job) == (8, 16384)  # one line for both nodes: both hold that much


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("subs", "expected"),
    [
        ({}, (1, 0)),  # as recorded: MinCPUsNode=1, no --mem (MinMemoryNode=0)
        ({"NumNodes": "2-2", "NumCPUs": "6", "MinMemoryNode": "8G"}, (3, 8192)),
        ({"NumNodes": "2", "NumCPUs": "3"}, (2, 0)),  # 3 CPUs on 2 nodes: one needs 2
        ({"NumCPUs": "4", "MinCPUsNode": "4", "MinMemoryNode": "1.50G"}, (4, 1536)),
        (
            {"NtasksPerN:B:S:C": "2:0:*:*", "CPUs/Task": "4", "NumNodes": "2-2", "NumCPUs": "16"},
            (8, 0),
        ),
    ],
)
def test_text_pending_job_needs_what_it_asked_per_node(
    recordings: SimpleNamespace, version: str, subs: dict[str, str], expected: tuple[int, int]
) -> None:
    job = text_job(recordings, version, "9", **subs)
    assert job.state == JobState.PENDING
    assert host_of(job) == expected


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("start", "planned"),
    [
        ("2026-11-29T18:00:00", SOON),
        ("Unknown", None),  # no plan (held job 10 as recorded)
        ("None", None),
        ("N/A", None),
        ("", None),
        ("1970-01-01T00:00:00", None),  # the epoch: no plan either
    ],
)
def test_text_pending_job_planned_start(
    recordings: SimpleNamespace, version: str, start: str, planned: datetime | None
) -> None:
    recorded = text_job(recordings, version, "9")
    assert (recorded.start_time, recorded.planned_start) == (None, PLANNED_9[version])
    assert text_job(recordings, version, "10").planned_start is None
    job = text_job(recordings, version, "9", StartTime=start)
    assert (job.state, job.start_time, job.planned_start) == (JobState.PENDING, None, planned)
    running = text_job(recordings, version, "1")
    assert running.start_time is not None
    assert running.planned_start is None


@pytest.mark.parametrize("start", ["soon", "0", "9999-12-31T23:59:59"])
def test_text_pending_job_garbage_start_is_no_plan(recordings: SimpleNamespace, start: str) -> None:
    """A pending job's StartTime is an estimate its owner steers (``--begin``): garbage or
    a year no snapshot holds reads as "no plan", never as a failed read."""
    job = text_job(recordings, "24.11", "9", StartTime=start)
    assert (job.state, job.start_time, job.planned_start) == (JobState.PENDING, None, None)
    assert job.request is not None


@pytest.mark.parametrize("version", VERSIONS)
def test_text_memory_per_cpu_times_cpus_per_node(recordings: SimpleNamespace, version: str) -> None:
    record = text_record(recordings, version, "scontrol_show_job_-d.txt", "JobId=9 ")
    record = record.replace("MinCPUsNode=1 MinMemoryNode=0", "MinCPUsNode=3 MinMemoryCPU=1.50G")
    (job,) = scontrol_text.jobs(record, "scontrol show job -d")
    assert host_of(job) == (3, 3 * 1536)


@pytest.mark.parametrize("version", VERSIONS)
def test_text_per_gpu_cpus_and_memory_times_gpus_per_node(
    recordings: SimpleNamespace, version: str
) -> None:
    """Job 9 asks 8 GPUs on one node; --cpus-per-gpu=4 --mem-per-gpu=2048 as scontrol
    prints them (22.05 ``gres:gpu:4``, 24.11 ``gres/gpu:4``)."""
    record = text_record(recordings, version, "scontrol_show_job_-d.txt", "JobId=9 ")
    sep = ":" if version == "22.05" else "/"
    # two lines, as slurm_sprint_job_info prints them
    extra = f"   CpusPerTres=gres{sep}gpu:4\n   MemPerTres=gres{sep}gpu:2048\n   TresPerNode="
    (job,) = scontrol_text.jobs(record.replace("   TresPerNode=", extra), "w")
    assert host_of(job) == (32, 16384)


@pytest.mark.parametrize("version", VERSIONS)
def test_text_node_offers_effective_cpus_and_unreserved_memory(
    recordings: SimpleNamespace, version: str
) -> None:
    record = text_record(recordings, version, "scontrol_show_node_-d.txt", "NodeName=node01 ")
    (node,) = scontrol_text.nodes(record, "scontrol show node -d")
    assert (node.cpus, node.cpus_alloc, node.memory_mb, node.memory_alloc_mb) == (32, 2, 512000, 0)
    record = (
        record.replace("CPUEfctv=32", "CPUEfctv=30")
        .replace("AllocMem=0", "AllocMem=4096")
        .replace("RealMemory=512000", "RealMemory=512000 MemSpecLimit=2000")
    )
    (node,) = scontrol_text.nodes(record, "scontrol show node -d")
    assert (node.cpus, node.memory_mb, node.memory_alloc_mb) == (30, 510000, 4096)
    assert (node.cpus_free, node.memory_free_mb) == (28, 505904)


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("CPUAlloc=2", "CPUAlloc=many", "nodes[0].CPUAlloc"),
        ("RealMemory=512000", "RealMemory=lots", "nodes[0].RealMemory"),
    ],
)
def test_text_node_garbage_names_the_field(
    recordings: SimpleNamespace, old: str, new: str, field: str
) -> None:
    record = text_record(recordings, "24.11", "scontrol_show_node_-d.txt", "NodeName=node01 ")
    with pytest.raises(SlurmParseError, match=re.escape(field)):
        scontrol_text.nodes(record.replace(old, new), "scontrol show node -d")


def test_text_unset_values_are_untracked(recordings: SimpleNamespace) -> None:
    record = text_record(recordings, "22.05", "scontrol_show_node_-d.txt", "NodeName=node01 ")
    record = re.sub(r"\b(CPUTot|CPUEfctv|RealMemory)=\S+", r"\1=N/A", record)
    (node,) = scontrol_text.nodes(record, "scontrol show node -d")
    assert (node.cpus, node.memory_mb, node.cpus_free) == (None, None, None)


def test_text_job_cpu_ids_garbage_names_the_field(recordings: SimpleNamespace) -> None:
    with pytest.raises(SlurmParseError, match=re.escape("jobs[0].Nodes[0].CPU_IDs")):
        text_job(recordings, "24.11", "1", CPU_IDs="zero")


# -- OpenAPI JSON (squeue --json, slurmrestd) ---------------------------------------------


def test_v0042_running_job_from_job_resources_allocation(recordings: SimpleNamespace) -> None:
    def edit(jobs: dict[str, Any]) -> None:
        node05, node06 = jobs["8"]["job_resources"]["nodes"]["allocation"]
        node05["cpus"]["count"], node05["memory"]["allocated"] = 4, 4096
        node06["cpus"]["count"], node06["memory"]["allocated"] = 2, 8192
        del jobs["7"]["job_resources"]["nodes"]["allocation"][0]["cpus"]  # absent: unknown

    jobs = json_jobs(recordings, "24.11", edit)
    assert host_of(jobs["8"]) == (2, 4096)
    assert host_of(jobs["7"]) == (0, 0)
    assert host_of(jobs["1"]) == (1, 0)


def test_v0042_pending_job_from_its_request(recordings: SimpleNamespace) -> None:
    def edit(jobs: dict[str, Any]) -> None:
        jobs["9"]["cpus"]["number"], jobs["9"]["node_count"]["number"] = 6, 2
        jobs["9"]["memory_per_node"] = {"set": False, "infinite": False, "number": 0}
        jobs["9"]["memory_per_cpu"] = {"set": True, "infinite": False, "number": 1536}
        jobs["10"]["memory_per_node"]["number"] = 65536

    jobs = json_jobs(recordings, "24.11", edit)
    assert host_of(jobs["9"]) == (3, 3 * 1536)
    assert host_of(jobs["10"]) == (1, 65536)


@pytest.mark.parametrize(
    ("start", "planned"),
    [
        ({"set": True, "infinite": False, "number": int(SOON.timestamp())}, SOON),
        ({"set": True, "infinite": False, "number": 0}, None),  # held job 10 as recorded
        ({"set": False, "infinite": False, "number": 0}, None),
        ({"set": False, "infinite": False, "number": int(SOON.timestamp())}, None),
        ({"set": True, "infinite": True, "number": 0}, None),
        ({"set": True, "infinite": True, "number": int(SOON.timestamp())}, None),
        (None, None),
    ],
)
def test_v0042_pending_job_planned_start(
    recordings: SimpleNamespace, start: Any, planned: datetime | None
) -> None:
    def edit(jobs: dict[str, Any]) -> None:
        jobs["9"]["start_time"] = start

    recorded = json_jobs(recordings, "24.11", lambda jobs: None)
    assert (recorded["9"].start_time, recorded["9"].planned_start) == (None, PLANNED_9["24.11"])
    assert recorded["10"].planned_start is None
    assert recorded["1"].start_time is not None
    assert recorded["1"].planned_start is None
    jobs = json_jobs(recordings, "24.11", edit)
    assert (jobs["9"].start_time, jobs["9"].planned_start) == (None, planned)


@pytest.mark.parametrize(
    "start",
    [
        "soon",
        {"set": True, "number": "soon"},
        {"set": True, "number": -1},
        {"set": True, "number": 2**40},
        {"set": True, "number": 10**10},
    ],
)
def test_v0042_pending_job_garbage_start_is_no_plan(
    recordings: SimpleNamespace, start: Any
) -> None:
    """As in text: an unreadable estimate is "no plan", the job itself is read."""

    def edit(jobs: dict[str, Any]) -> None:
        jobs["9"]["start_time"] = start

    job = json_jobs(recordings, "24.11", edit)["9"]
    assert (job.state, job.start_time, job.planned_start) == (JobState.PENDING, None, None)
    assert job.request is not None


def test_v0038_running_job_counts_allocated_cores_times_threads(
    recordings: SimpleNamespace,
) -> None:
    two_cores = {"0": {"cores": {"0": "allocated", "1": "allocated"}}}

    def edit(jobs: dict[str, Any]) -> None:
        for node in jobs["8"]["job_resources"]["allocated_nodes"]:
            node["sockets"], node["memory_allocated"] = two_cores, 1024
        jobs["8"]["cpus"] = 8  # 4 cores, 2 threads each: 4 CPUs per node
        jobs["7"]["job_resources"]["allocated_nodes"][0]["sockets"] = two_cores
        jobs["7"]["cpus"] = 3  # 3 CPUs on 2 cores: threads per core unclear, unknown

    jobs = json_jobs(recordings, "22.05", edit)
    assert host_of(jobs["8"]) == (4, 1024)
    assert host_of(jobs["7"]) == (0, 0)
    assert host_of(jobs["1"]) == (1, 0)


def test_v0038_pending_job_from_its_request(recordings: SimpleNamespace) -> None:
    def edit(jobs: dict[str, Any]) -> None:
        jobs["9"].update(cpus=4, node_count=1, minimum_cpus_per_node=4, memory_per_node=2048)
        jobs["10"].update(cpus=2, tasks_per_node=2, cpus_per_task=3, memory_per_cpu=100)

    jobs = json_jobs(recordings, "22.05", edit)
    assert host_of(jobs["9"]) == (4, 2048)
    assert host_of(jobs["10"]) == (6, 600)


@pytest.mark.parametrize(("start", "planned"), [(int(SOON.timestamp()), SOON), (0, None)])
def test_v0038_pending_job_planned_start(
    recordings: SimpleNamespace, start: int, planned: datetime | None
) -> None:
    def edit(jobs: dict[str, Any]) -> None:
        jobs["9"]["start_time"] = start

    recorded = json_jobs(recordings, "22.05", lambda jobs: None)
    assert (recorded["9"].start_time, recorded["9"].planned_start) == (None, PLANNED_9["22.05"])
    assert recorded["10"].planned_start is None  # start_time 0
    jobs = json_jobs(recordings, "22.05", edit)
    assert (jobs["9"].start_time, jobs["9"].planned_start) == (None, planned)
    garbled = json_jobs(recordings, "22.05", lambda jobs: jobs["9"].update(start_time=-5))
    assert garbled["9"].planned_start is None  # an unreadable estimate: no plan


@pytest.mark.parametrize("version", VERSIONS)
def test_json_per_gpu_cpus_and_memory(recordings: SimpleNamespace, version: str) -> None:
    """What 24.11 printed live for ``--cpus-per-gpu=4 --mem-per-gpu=2G --gres=gpu:2``:
    ``cpus_per_tres: "gres/gpu:4"``, ``memory_per_tres: "gres/gpu:2048"`` and the per-GPU
    value copied into ``memory_per_node`` (which must not win)."""
    sep = ":" if version == "22.05" else "/"

    def edit(jobs: dict[str, Any]) -> None:
        jobs["9"].update(cpus_per_tres=f"gres{sep}gpu:4", memory_per_tres=f"gres{sep}gpu:2048")
        if version == "24.11":
            jobs["9"]["memory_per_node"]["number"] = 2048

    jobs = json_jobs(recordings, version, edit)
    assert host_of(jobs["9"]) == (32, 16384)  # 8 GPUs on its node


@pytest.mark.parametrize("version", VERSIONS)
def test_rest_nodes(recordings: SimpleNamespace, version: str) -> None:
    api = {"22.05": "v0.0.38", "24.11": "v0.0.42"}[version]
    path = recordings.dir(version) / f"slurmrestd_GET_slurm_{api}_nodes.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    node01 = data["nodes"][0]
    node01.update(alloc_cpus=6, alloc_memory=4096)
    if version == "24.11":  # only data_parser schemas know specialised CPUs and memory
        node01.update(effective_cpus=30, specialized_memory=2000)
    nodes = openapi.family(data, "GET nodes").nodes(Doc(data, "GET nodes", ""))
    got = (nodes[0].cpus, nodes[0].cpus_alloc, nodes[0].memory_mb, nodes[0].memory_alloc_mb)
    assert got == ((30, 6, 510000, 4096) if version == "24.11" else (32, 6, 512000, 4096))


def test_json_garbage_names_the_field(recordings: SimpleNamespace) -> None:
    """The field is named in the job's ``unreadable`` reason (issue #40: it costs that job
    its CPU and memory figures, not the read)."""

    def edit(jobs: dict[str, Any]) -> None:
        jobs["8"]["job_resources"]["nodes"]["allocation"][1]["memory"]["allocated"] = "lots"

    job = json_jobs(recordings, "24.11", edit)["8"]
    assert job.unreadable.startswith("host_use: squeue --json: ")
    assert "jobs[7].job_resources.nodes.allocation[1].memory.allocated" in job.unreadable
    assert host_of(job) == (0, 0)


# -- pyslurm and the shared rules ---------------------------------------------------------


def test_pyslurm_layout() -> None:
    layout = {
        "node01": {"cpu_ids": "0-3", "memory": 4096},
        "node02": {"cpu_ids": "0-5,16", "memory": None},
    }
    per_node = layout_host(layout, "jobs[0]")
    assert per_node == [cpu_memory.HostUse(4, 4096), cpu_memory.HostUse(7, 0)]
    assert cpu_memory.held(per_node) == cpu_memory.HostUse(4, 0)  # node02's memory unknown


@pytest.mark.parametrize(
    ("text", "mb"),
    [
        ("100000", 100000),
        ("4096M", 4096),
        ("4G", 4096),
        ("1.50G", 1536),
        ("2T", 2097152),
        ("512K", 0),
        ("0", 0),
        ("N/A", None),
        ("", None),
        ("(null)", None),
    ],
)
def test_memory_sizes(text: str, mb: int | None) -> None:
    assert cpu_memory.memory_mb(text, "w", "f") == mb


@pytest.mark.parametrize("text", ["lots", "4GB", "-1", "1e3"])
def test_memory_garbage_names_the_field(text: str) -> None:
    with pytest.raises(SlurmParseError, match=r"^w: jobs\[0\]\.MinMemoryNode: not a memory"):
        cpu_memory.memory_mb(text, "w", "jobs[0].MinMemoryNode")


def test_gpus_per_node_of_requests() -> None:
    assert cpu_memory.gpus_per_node(None) == 0
    assert cpu_memory.gpus_per_node(GpuRequest(nodes=2, gpus_per_node=4)) == 4
    assert cpu_memory.gpus_per_node(GpuRequest(nodes=2, total_gpus=3)) == 2  # --gpus=3 -N2


def test_pyslurm_jobs(recordings: SimpleNamespace) -> None:
    path = recordings.dir("24.11") / "pyslurm-24.11_jobs.json"
    jobs = json.loads(path.read_text(encoding="utf-8"))
    layout = {
        "node05": {"cpu_ids": "0-3", "memory": 4096},
        "node06": {"cpu_ids": "0-1", "memory": 8192},
    }
    running = pyslurm_job(Doc(jobs["8"], "pyslurm", "jobs[7]"), layout)
    assert running is not None
    assert host_of(running) == (2, 4096)
    jobs["9"].update(cpus_per_gpu=6, memory_per_gpu=2048, memory_per_node=2048)
    pending = pyslurm_job(Doc(jobs["9"], "pyslurm", "jobs[8]"), {})
    assert pending is not None
    assert host_of(pending) == (48, 16384)  # 8 GPUs


@pytest.mark.parametrize(
    ("start", "planned"),
    [(int(SOON.timestamp()), SOON), (None, None), (0, None)],  # pyslurm: None = unset
)
def test_pyslurm_pending_job_planned_start(
    recordings: SimpleNamespace, start: int | None, planned: datetime | None
) -> None:
    path = recordings.dir("24.11") / "pyslurm-24.11_jobs.json"
    jobs = json.loads(path.read_text(encoding="utf-8"))

    def mapped(job_id: str, **edits: Any) -> Job:
        job = pyslurm_job(Doc({**jobs[job_id], **edits}, "pyslurm", "jobs[8]"), {})
        assert job is not None
        return job

    recorded = mapped("9")
    assert (recorded.start_time, recorded.planned_start) == (None, PLANNED_9["24.11"])
    assert mapped("10").planned_start is None  # held: start_time None
    running = mapped("1")
    assert running.start_time is not None
    assert running.planned_start is None
    job = mapped("9", start_time=start)
    assert (job.state, job.start_time, job.planned_start) == (JobState.PENDING, None, planned)
    assert mapped("9", start_time="soon").planned_start is None  # unreadable: no plan


def test_running_job_without_allocation_is_unknown_and_pending_ignores_allocation() -> None:
    need = cpu_memory.HostUse(4, 1000)
    assert cpu_memory.job_use(JobState.RUNNING, [], need) == {
        "cpus_per_node": 0,
        "memory_mb_per_node": 0,
    }
    assert cpu_memory.job_use(JobState.PENDING, [cpu_memory.HostUse(9, 9)], need) == {
        "cpus_per_node": 4,
        "memory_mb_per_node": 1000,
    }


def test_node_fields_fall_back_to_totals() -> None:
    fields = cpu_memory.node_fields(cpus=64, cpus_alloc=None, memory=0, memory_alloc=None)
    node = Node(name="n", **fields)
    assert (node.cpus, node.cpus_alloc, node.memory_mb, node.memory_alloc_mb) == (64, 0, None, 0)


def test_fake_requeue_frees_the_cpus_and_memory_too(recordings: SimpleNamespace) -> None:
    snap = recordings.cli("24.11").snapshot()
    jobs = tuple(
        j.model_copy(update={"memory_mb_per_node": 1024}) if j.id == "8" else j for j in snap.jobs
    )
    nodes = tuple(
        n.model_copy(update={"memory_alloc_mb": 1024}) if n.name == "node05" else n
        for n in snap.nodes
    )
    fake = FakeSlurm(snap.model_copy(update={"jobs": jobs, "nodes": nodes}))
    fake.requeue("8", "test")
    after = fake.snapshot()
    for name in ("node05", "node06"):
        node = after.node_by_name[name]
        assert (node.cpus_alloc, node.memory_alloc_mb, node.cpus_free) == (0, 0, 32), name
    assert host_of(after.job_by_id["8"]) == (1, 1024)  # asks again for what it held


def test_one_table_names_each_host_number_in_both_structured_sources() -> None:
    # the OpenAPI JSON and pyslurm read the same parameters from one table (issue #43)
    assert set(cpu_memory.NODE_HOST) <= set(inspect.signature(cpu_memory.node_fields).parameters)
    assert set(cpu_memory.ASKED) <= set(inspect.signature(cpu_memory.needed).parameters)
    numbers = {"node_count": 2, "num_nodes": 3, "cpus_per_gpu": 8}
    openapi_read = cpu_memory.read(cpu_memory.ASKED, "openapi", numbers.get)
    pyslurm_read = cpu_memory.read(cpu_memory.ASKED, "pyslurm", numbers.get)
    assert openapi_read["nodes"] == 2
    assert pyslurm_read["nodes"] == 3
    assert "cpus_per_gpu" not in openapi_read  # the JSON has no such field: the default
    assert pyslurm_read["cpus_per_gpu"] == 8
