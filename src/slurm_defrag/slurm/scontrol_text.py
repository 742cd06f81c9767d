"""``scontrol show {job -d, node -d, partition, reservation}`` text -> domain objects.

Used where Slurm has no JSON (22.05 has no ``scontrol ... --json``: partitions and
reservations), as the fallback when ``--json`` is refused, and to cross-check the per-node
GPU indices of jobs (``Nodes=node[05-06] ... GRES=gpu:a100:2(IDX:0-1)``: one detail line
per group of nodes with identical allocations, so the host list is expanded).

The multi-line format (without ``-o``) is parsed: free-text fields such as a node's
``Reason=`` or a job's ``Comment=`` then start their own line and may contain spaces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from slurm_defrag.domain.cluster import GPU_MEMORY_GB, Job, Node, Partition, Reservation
from slurm_defrag.slurm import host
from slurm_defrag.slurm import mapping as m

# Keys whose value is the rest of the line when they start it (they may contain spaces).
_FREE_TEXT = frozenset(
    {"Reason", "Comment", "AdminComment", "SystemComment", "OS", "Command", "WorkDir",
     "StdErr", "StdIn", "StdOut", "Extra"}
)
_KEY = re.compile(r"^([A-Za-z][\w/:.]*)=")


@dataclass
class Record:
    """One ``Key=Value`` record; ``details`` holds a job's per-node ``Nodes=...`` lines."""

    fields: dict[str, str] = field(default_factory=dict)
    details: list[dict[str, str]] = field(default_factory=list)


def parse_line(line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    last: str | None = None
    for tok in re.finditer(r"\S+", line):
        km = _KEY.match(tok.group())
        if km is None:
            if last is not None:  # a value with spaces: "OS=Linux 6.1 #1 SMP"
                out[last] += " " + tok.group()
            continue
        key = km[1]
        if key in _FREE_TEXT and tok.start() == len(line) - len(line.lstrip()):
            out[key] = line[tok.start() + len(key) + 1 :].rstrip()
            break
        out[key] = tok.group()[len(key) + 1 :]
        last = key
    return out


def parse_records(text: str) -> list[Record]:
    """A record starts at an unindented ``Key=`` line; the indented lines continue it.

    (Blank lines are not reliable separators: 24.11 prints a whitespace-only line inside a
    node record, before ``ReservationName=``.) A job's ``Nodes=`` lines become ``details``.
    """
    records: list[Record] = []
    cur: Record | None = None
    for line in text.splitlines():
        if "=" not in line:  # blank, or "No jobs in the system"
            continue
        fields = parse_line(line)
        if cur is None or not line[:1].isspace():
            cur = Record()
            records.append(cur)
        if "Nodes" in fields and "JobId" in cur.fields and line.lstrip().startswith("Nodes="):
            cur.details.append(fields)
        else:
            cur.fields.update(fields)
    return records


def _val(r: Record, key: str) -> str:
    v = r.fields.get(key, "")
    return "" if v in m.NULLS else v


def _int(r: Record, key: str, where: str, path: str) -> int | None:
    v = _val(r, key).split("-", 1)[0]  # NumNodes=1-1 (min-max)
    if not v:
        return None
    if not v.isdigit():
        raise m.parse_error(where, f"{path}.{key}", f"not an integer: {v!r}")
    return int(v)


def nodes(text: str, where: str) -> list[Node]:
    out = []
    for i, r in enumerate(parse_records(text)):
        path = f"nodes[{i}]"
        if "NodeName" not in r.fields:
            raise m.parse_error(where, f"{path}.NodeName", "missing")
        model, count = m.gpu_inventory(_val(r, "Gres"), where, f"{path}.Gres")
        out.append(
            m.build(
                Node,
                where,
                path,
                name=r.fields["NodeName"],
                partitions=m.split_list(_val(r, "Partitions")),
                state=m.node_flags([_val(r, "State")]),
                gpu_model=model,
                gpu_count=count,
                gpu_memory_gb=GPU_MEMORY_GB.get(model or "", 0.0),
                gpus_used=m.indices(_val(r, "GresUsed"), where, f"{path}.GresUsed"),
                reservation=_val(r, "ReservationName") or None,
                features=m.split_list(_val(r, "ActiveFeatures")),
                weight=_int(r, "Weight", where, path),
                reason=m.strip_reason_stamp(_val(r, "Reason")),
                **host.node_fields(
                    cpus=_int(r, "CPUTot", where, path),
                    effective_cpus=_int(r, "CPUEfctv", where, path),
                    cpus_alloc=_int(r, "CPUAlloc", where, path),
                    memory=_memory(r, "RealMemory", where, path),
                    memory_spec=_memory(r, "MemSpecLimit", where, path),
                    memory_alloc=_memory(r, "AllocMem", where, path),
                ),
            )
        )
    return out


def _memory(r: Record, key: str, where: str, path: str) -> int | None:
    return host.memory_mb(_val(r, key), where, f"{path}.{key}")


def jobs(text: str, where: str) -> list[Job]:
    out = []
    for i, r in enumerate(parse_records(text)):
        job = _job(r, where, f"jobs[{i}]")
        if job is not None:
            out.append(job)
    return out


def _job(r: Record, where: str, path: str) -> Job | None:
    if "JobId" not in r.fields:
        raise m.parse_error(where, f"{path}.JobId", "missing")
    state = m.job_state(_val(r, "JobState"), where, f"{path}.JobState")
    if state in m.FINISHED:
        return None
    comment, admin_comment = _val(r, "Comment"), _val(r, "AdminComment")
    request = m.gpu_request(
        where=where,
        path=path,
        per_node=_val(r, "TresPerNode"),
        per_job=_val(r, "TresPerJob"),
        per_task=_val(r, "TresPerTask"),
        nodes=_int(r, "NumNodes", where, path),
        tasks=_int(r, "NumTasks", where, path),
        exclusive=_val(r, "OverSubscribe") == "NO",
        comment=comment,
        admin_comment=admin_comment,
    )
    need = _job_needs(r, where, path, host.gpus_per_node(request))
    return m.build(
        Job,
        where,
        path,
        id=m.job_id(
            r.fields["JobId"],
            _int(r, "ArrayJobId", where, path),
            _int(r, "ArrayTaskId", where, path),
            _int(r, "HetJobId", where, path),
            _int(r, "HetJobOffset", where, path),
        ),
        name=_val(r, "JobName"),
        user=_val(r, "UserId").split("(", 1)[0],
        account=_val(r, "Account"),
        partition=_val(r, "Partition"),
        qos=_val(r, "QOS"),
        priority=_int(r, "Priority", where, path) or 0,
        state=state,
        reason=_val(r, "Reason"),
        submit_time=m.text_time(_val(r, "SubmitTime"), where, f"{path}.SubmitTime"),
        start_time=None
        if state == "PENDING"
        else m.text_time(_val(r, "StartTime"), where, f"{path}.StartTime"),
        time_limit_s=m.duration_s(_val(r, "TimeLimit"), where, f"{path}.TimeLimit"),
        requeue=_val(r, "Requeue") != "0",
        gpus=job_gpus(r, where, path),
        request=request,
        comment=comment,
        admin_comment=admin_comment,
        **host.job_use(state, job_allocation(r, where, path), need),
    )


def _job_needs(r: Record, where: str, path: str, gpus: int) -> host.HostUse:
    # NtasksPerN:B:S:C=2:0:*:* -> 2 tasks per node (0 = not given).
    tasks_per_node = _val(r, "NtasksPerN:B:S:C").split(":", 1)[0]
    return host.needed(
        cpus=_int(r, "NumCPUs", where, path),
        nodes=_int(r, "NumNodes", where, path),
        cpus_per_task=_int(r, "CPUs/Task", where, path),
        tasks_per_node=int(tasks_per_node) if tasks_per_node.isdigit() else None,
        min_cpus_per_node=_int(r, "MinCPUsNode", where, path),
        memory_per_node=_memory(r, "MinMemoryNode", where, path),
        memory_per_cpu=_memory(r, "MinMemoryCPU", where, path),
        gpus=gpus,
        cpus_per_gpu=host.per_gpu(_val(r, "CpusPerTres"), where, f"{path}.CpusPerTres"),
        memory_per_gpu=host.per_gpu(_val(r, "MemPerTres"), where, f"{path}.MemPerTres"),
    )


def job_allocation(r: Record, where: str, path: str) -> list[host.HostUse]:
    """CPUs and memory per detail line (``Nodes=... CPU_IDs=0-3 Mem=4096 ...``)."""
    out = []
    for i, d in enumerate(r.details):
        field_ = f"{path}.Nodes[{i}]"
        cpus = host.count_ids(d.get("CPU_IDs", ""), where, f"{field_}.CPU_IDs")
        memory = host.memory_mb(d.get("Mem", ""), where, f"{field_}.Mem")
        out.append(host.HostUse(cpus, memory or 0))
    return out


def job_gpus(r: Record, where: str, path: str) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for i, d in enumerate(r.details):
        gres = d.get("GRES", "")
        if not gres:
            continue
        field_ = f"{path}.Nodes[{i}]"
        idx = m.indices(gres, where, f"{field_}.GRES")
        for node in m.expand_nodes(d.get("Nodes", ""), where, f"{field_}.Nodes"):
            out[node] = idx
    return out


def partitions(text: str, where: str) -> list[Partition]:
    out = []
    for i, r in enumerate(parse_records(text)):
        path = f"partitions[{i}]"
        if "PartitionName" not in r.fields:
            raise m.parse_error(where, f"{path}.PartitionName", "missing")
        out.append(
            m.build(
                Partition,
                where,
                path,
                name=r.fields["PartitionName"],
                nodes=m.expand_nodes(_val(r, "Nodes"), where, f"{path}.Nodes"),
                priority_tier=_int(r, "PriorityTier", where, path) or 0,
                preempt_mode=m.preempt_mode(_val(r, "PreemptMode")),
            )
        )
    return out


def reservations(text: str, where: str, now: datetime) -> list[Reservation]:
    out = []
    for i, r in enumerate(parse_records(text)):
        path = f"reservations[{i}]"
        if "ReservationName" not in r.fields:
            raise m.parse_error(where, f"{path}.ReservationName", "missing")
        start = m.text_time(_val(r, "StartTime"), where, f"{path}.StartTime")
        end = m.text_time(_val(r, "EndTime"), where, f"{path}.EndTime")
        out.append(
            m.build(
                Reservation,
                where,
                path,
                name=r.fields["ReservationName"],
                nodes=m.expand_nodes(_val(r, "Nodes"), where, f"{path}.Nodes"),
                start_time=start,
                end_time=end,
                users=m.split_list(_val(r, "Users")),
                accounts=m.split_list(_val(r, "Accounts")),
                flags=tuple(sorted(f.upper() for f in m.split_list(_val(r, "Flags")))),
                state=_val(r, "State") or m.reservation_state(start, end, now),
            )
        )
    return out
