"""Alibaba cluster-trace-gpu-v2023 ("openb"), the trace of the FGD paper.

Files (``shared/traces/alibaba-gpu-v2023/``): ``openb_node_list_gpu_node.csv`` (the 1213
GPU nodes the paper simulates), ``openb_node_list_all_node.csv`` (plus 310 CPU-only
nodes) and ``openb_pod_list_<variant>.csv`` (``default`` and the cpu*, gpushare*, gpuspec*,
multigpu* samples). Conversions follow the artifact's ``pod_csv_to_yaml.py``: a
``gpu_milli`` above 1000 is clamped to 1000, ``gpu_spec`` ``A|B`` means "model A or B".
The multigpu* files carry no timestamps; their jobs get submit 0 and duration 0.
"""

from __future__ import annotations

import csv
from pathlib import Path

from slurm_defrag.domain.units import MILLI
from slurm_defrag.errors import InputError
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.traces.paths import WHERE_TO_GET, trace_root

FOLDER = "alibaba-gpu-v2023"
NODE_LISTS = {"gpu": "openb_node_list_gpu_node.csv", "all": "openb_node_list_all_node.csv"}
_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


def folder(root: Path | None = None) -> Path:
    path = trace_root(root) / FOLDER
    if not path.is_dir():
        raise InputError(f"{path}: no openb trace here; {WHERE_TO_GET}")
    return path


def pod_variants(root: Path | None = None) -> list[str]:
    """Every pod-list variant present, e.g. ``default``, ``gpushare40``, ``multigpu50``."""
    prefix = "openb_pod_list_"
    return sorted(p.stem.removeprefix(prefix) for p in folder(root).glob(f"{prefix}*.csv"))


def _rows(path: Path, needed: tuple[str, ...]) -> list[dict[str, str]]:
    if not path.is_file():
        raise InputError(f"{path}: no such trace file")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in needed if c not in (reader.fieldnames or ())]
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
        return list(reader)


def _int(path: Path, line: int, row: dict[str, str], col: str) -> int:
    try:
        return int(float(row[col]))
    except (TypeError, ValueError):
        raise InputError(f"{path}:{line}: {col}={row.get(col)!r} is not a number") from None


def load_nodes(which: str = "gpu", root: Path | None = None) -> list[NodeSpec]:
    """Nodes of the ``gpu`` (1213 nodes, the paper's cluster) or ``all`` node list."""
    if which not in NODE_LISTS:
        raise InputError(f"node list {which!r}: choose from {', '.join(NODE_LISTS)}")
    path = folder(root) / NODE_LISTS[which]
    out = []
    for i, row in enumerate(_rows(path, _NODE_COLUMNS), start=2):
        gpus = _int(path, i, row, "gpu")
        out.append(
            NodeSpec(
                name=row["sn"],
                cpu_milli=_int(path, i, row, "cpu_milli"),
                memory_mib=_int(path, i, row, "memory_mib"),
                gpus=gpus,
                model=row["model"] or "none",
            )
        )
    return out


def load_pods(variant: str = "default", root: Path | None = None) -> list[JobSpec]:
    """Pods of one pod-list variant, in file order."""
    path = folder(root) / f"openb_pod_list_{variant}.csv"
    if not path.is_file():
        known = ", ".join(pod_variants(root))
        raise InputError(f"openb pod list {variant!r} not found; variants: {known}")
    out = []
    for i, row in enumerate(_rows(path, _POD_COLUMNS), start=2):
        num = _int(path, i, row, "num_gpu")
        milli = min(_int(path, i, row, "gpu_milli"), MILLI) if num else 0
        spec = (row.get("gpu_spec") or "").strip()
        models = frozenset(m for m in spec.split("|") if m) or None
        created = float(row["creation_time"]) if row.get("creation_time") else 0.0
        deleted = float(row["deletion_time"]) if row.get("deletion_time") else created
        try:
            out.append(
                JobSpec(
                    name=row["name"],
                    cpu_milli=_int(path, i, row, "cpu_milli"),
                    memory_mib=_int(path, i, row, "memory_mib"),
                    num_gpu=num,
                    gpu_milli=milli,
                    gpu_models=models if num else None,
                    submit=created,
                    duration=max(deleted - created, 0.0),
                )
            )
        except ValueError as exc:
            raise InputError(f"{path}:{i}: {exc}") from None
    return out
