"""Issue #15 regressions: numbers and types from Slurm output are bounded before any work.

Each test names the defect it pins. Before the fixes these inputs expanded ranges into
gigabytes, raised ValueError/OverflowError/TypeError/AttributeError/RecursionError
tracebacks, or were read as something else without a word; now each is one
SlurmParseError naming the field, in bounded memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from fuzzing import assert_clean
from slurm_defrag.domain.gres import GresParseError, gpu_indices, parse_gres
from slurm_defrag.slurm import pyslurm_adapter
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.failures import SlurmParseError, SlurmRejectedError
from slurm_defrag.slurm.parse import cpu_memory, openapi
from slurm_defrag.slurm.parse import mapping as m
from slurm_defrag.slurm.parse.mapping import Doc
from slurm_defrag.slurm.rest import RestSlurm

NOW = datetime(2026, 11, 29, 15, 14, 13, tzinfo=UTC)


def refused(fn: Callable[..., Any], *args: Any, match: str) -> None:
    """``fn(*args)`` raises one SlurmParseError matching ``match``, in bounded memory."""
    raised: list[SlurmParseError] = []

    def call() -> Any:
        try:
            return fn(*args)
        except SlurmParseError as exc:
            raised.append(exc)
            raise

    assert_clean(call)
    assert raised, "no SlurmParseError"
    assert re.search(match, str(raised[0])), str(raised[0])


# -- 1. bounds before expanding ----------------------------------------------------------


def test_gres_index_range_is_bounded_before_expanding() -> None:
    """Defect: ``IDX:0-99999999`` was expanded before the 16-GPU bound (2.3 GB, MemoryError).

    ``0-999999`` took over 64 MB before the fix; now each is refused without expanding.
    """
    for text in ("gpu:a100:2(IDX:0-999999)", "gpu:a100:2(IDX:0-99999999)"):
        with pytest.raises(GresParseError, match="out of range"):
            assert_clean(gpu_indices, text)


def test_gres_index_16_is_out_of_range() -> None:
    """A node has at most 16 GPUs (MAX_GPUS_PER_NODE): index 16 cannot exist."""
    with pytest.raises(GresParseError, match="GPU index 16 out of range"):
        gpu_indices("gpu:a100:1(IDX:16)")


def test_gres_count_with_thousands_of_digits_is_refused() -> None:
    """Defect: int() of a 5,000-digit count raised ValueError (Python's 4,300-digit limit)."""
    with pytest.raises(GresParseError, match="not a number"):
        parse_gres("gpu:a100:" + "9" * 5000)


def test_cpu_ids_are_counted_not_expanded() -> None:
    """Defect: ``CPU_IDs=0-99999999`` was expanded into a set to count it."""
    assert cpu_memory.count_ids("0-3,2-5,8", "w", "CPU_IDs") == 7  # overlaps counted once
    for ids in ("0-999999", "0-99999999"):  # the first took over 64 MB before the fix
        refused(cpu_memory.count_ids, ids, "w", "CPU_IDs", match="w: CPU_IDs: not a CPU id list")
    assert assert_clean(cpu_memory.count_ids, "0-65535", "w", "CPU_IDs") == 65536


@pytest.mark.parametrize(
    "hosts",
    [
        # ten ranges of 100,000 names each: python-hostlist caps one range, not the sum
        ",".join(f"n{i}[0-99999]" for i in range(10)),
        # a bracket group per level of python-hostlist's recursion: RecursionError
        "n" + "[1]" * 1200,
        # a range bound python-hostlist int()s: ValueError past 4,300 digits
        "node[1-" + "9" * 5000 + "]",
    ],
    ids=["sum-of-ranges", "deep-groups", "huge-bound"],
)
def test_host_list_is_sized_before_expanding(hosts: str) -> None:
    """Defect: host lists went to python-hostlist unsized (1 M names = ~100 MB, or a crash)."""
    refused(m.expand_nodes, hosts, "w", "nodes", match="w: nodes: bad host list")


def test_host_list_of_a_big_cluster_still_expands() -> None:
    assert len(m.expand_nodes("gpu[00001-20000],cpu[1-100]", "w", "nodes")) == 20100


@pytest.mark.parametrize(
    ("text", "match"),
    [("9" * 400, "not a memory size"), ("9" * 18 + "P", "out of range")],
)
def test_memory_size_is_bounded(text: str, match: str) -> None:
    """Defect: ``Mem=999...`` (400 digits) was float inf, and round(inf) an OverflowError."""
    with pytest.raises(SlurmParseError, match=match):
        cpu_memory.memory_mb(text, "w", "Mem")


def test_duration_digits_are_bounded() -> None:
    """Defect: ``TimeLimit=`` with 5,000 digits raised ValueError from int()."""
    with pytest.raises(SlurmParseError, match="not a duration"):
        m.duration_s("9" * 5000, "w", "TimeLimit")
    assert m.duration_s("999999999-00:00:00", "w", "TimeLimit") == 999999999 * 86400


@pytest.mark.parametrize("seconds", [10**12, -5, 2**63])
def test_epoch_out_of_range_is_a_parse_error(seconds: int) -> None:
    """Defect: ``submit_time`` past year 9999 or negative raised ValueError/OSError."""
    d = Doc({"submit_time": seconds}, "squeue --json", "jobs[0]")
    with pytest.raises(SlurmParseError, match=r"jobs\[0\].submit_time: time out of range"):
        d.time("submit_time")


def test_recorded_far_future_epoch_is_kept() -> None:
    """pyslurm 24.11 records an end time in 2164: still a time."""
    assert m.epoch(6122468479) == datetime(2164, 1, 5, 21, 41, 19, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (float("nan"), "expected a number, got nan"),
        (float("inf"), "expected a number, got inf"),
        (10**400, "number out of range"),
        ({"set": True, "infinite": False, "number": 2**64}, r"priority.number: number out"),
    ],
)
def test_json_numbers_are_finite_and_64_bit(value: Any, match: str) -> None:
    """Defect: NaN raised ValueError and inf OverflowError from int(); 10**400 was kept."""
    with pytest.raises(SlurmParseError, match=match):
        Doc({"priority": value}, "w", "jobs[0]").number("priority")


# -- 2. ASCII digits only ----------------------------------------------------------------


@pytest.mark.parametrize("text", ["gpu:a100:1(IDX:²)", "gpu:a100:1(IDX:0-²)", "gpu:a100:1(IDX:٣)"])
def test_unicode_digit_in_gpu_index_is_a_parse_error(text: str) -> None:
    """Defect: ``"²".isdigit()`` is True and ``int("²")`` a ValueError traceback."""
    with pytest.raises(SlurmParseError, match="bad GPU index range"):
        m.indices(text, "w", "gres_used")


def test_unicode_digit_is_no_gres_count() -> None:
    """``gpu:a100:٣`` was read as 3 GPUs (``\\d`` matches any Unicode decimal digit)."""
    with pytest.raises(GresParseError):
        parse_gres("gpu:a100:٣")


def test_unicode_digits_in_names_sort_without_int() -> None:
    """Defect: a node or job named ``²`` (or with a 5,000-digit run) crashed natural_key."""
    names = ["node10", "²", "node" + "9" * 5000, "node2", "node٣"]
    ordered = sorted(names, key=m.natural_key)
    assert ordered.index("node2") < ordered.index("node10") < ordered.index(names[2])


def test_unicode_digit_is_no_nvlink_count() -> None:
    """``defrag:nvlink=²`` was read as "needs NVLink"; it is unreadable, so the default."""
    assert m.nvlink_from_comments("defrag:nvlink=²", "") is None
    assert m.nvlink_from_comments("defrag:nvlink=4", "") is True


# -- 3. wrong JSON types: one SlurmParseError naming the field ------------------------


def recorded(recordings: SimpleNamespace, version: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(recordings.text(version, name))
    return data


@pytest.mark.parametrize(
    ("version", "name", "key", "field", "value", "match"),
    [
        # TypeError: 'int' object is not iterable (split_list)
        (
            "22.05",
            "sinfo_--json.json",
            "nodes",
            "partitions",
            5,
            r"nodes\[0\].partitions: expected a list of strings, got int",
        ),
        # AttributeError: 'str' object has no attribute 'get' (job_nodes)
        (
            "22.05",
            "squeue_--json.json",
            "jobs",
            "job_resources",
            {"allocated_nodes": "node01"},
            r"jobs\[0\].job_resources.allocated_nodes: expected a list, got str",
        ),
        (
            "24.11",
            "squeue_--json.json",
            "jobs",
            "job_resources",
            {"nodes": {"allocation": 7}},
            r"jobs\[0\].job_resources.nodes.allocation: expected a list",
        ),
        # silently wrong: "false" was truthy, a dict became the job id "{'set': ...}"
        (
            "24.11",
            "squeue_--json.json",
            "jobs",
            "requeue",
            "false",
            r"jobs\[0\].requeue: expected true or false, got 'false'",
        ),
        (
            "24.11",
            "squeue_--json.json",
            "jobs",
            "job_id",
            {"set": True, "number": 1},
            r"jobs\[0\].job_id: not a job id",
        ),
        (
            "24.11",
            "squeue_--json.json",
            "jobs",
            "job_id",
            "8,1",
            r"jobs\[0\].job_id: not a job id: '8,1'",
        ),
        (
            "24.11",
            "squeue_--json.json",
            "jobs",
            "array_task_id",
            -3,
            r"jobs\[0\].job_id: job \d+: id part out of range: -3",
        ),
        (
            "24.11",
            "scontrol_show_nodes_--json.json",
            "nodes",
            "state",
            [{"x": 1}],
            r"nodes\[0\].state\[0\]: expected a string",
        ),
        (
            "24.11",
            "scontrol_show_reservations_--json.json",
            "reservations",
            "users",
            [["a"]],
            r"reservations\[0\].users\[0\]: expected a string",
        ),
    ],
)
def test_wrong_json_type_names_the_field(
    recordings: SimpleNamespace,
    version: str,
    name: str,
    key: str,
    field: str,
    value: Any,
    match: str,
) -> None:
    doc = recorded(recordings, version, name)
    doc[key][0][field] = value
    fam = openapi.family(doc, "w")
    if key == "jobs":
        # Issue #40: a job record pays for itself: the field is named in its reason (or
        # in the reason it is left out, without an id), and the read goes on.
        read = fam.read_jobs(Doc(doc, "w", ""))
        reasons = [j.unreadable for j in read.jobs if j.unreadable] + read.left_out
        assert len(reasons) == 1, reasons
        assert re.search(match, reasons[0]), reasons
        return
    call = {
        "jobs": fam.jobs,
        "nodes": fam.nodes,
        "partitions": fam.partitions,
        "reservations": lambda d: fam.reservations(d, NOW),
    }[key]
    refused(call, Doc(doc, "w", ""), match=match)


def test_errors_field_of_another_type_is_no_traceback() -> None:
    """Defect: ``"errors": 5`` raised TypeError iterating it; it still means a failure."""
    with pytest.raises(SlurmRejectedError, match="Slurm rejected squeue --json: 5"):
        openapi.check_errors({"errors": 5}, "squeue --json")


@pytest.mark.parametrize(
    "body",
    [b'{"meta": 1' + b"1" * 5000 + b"}", b"[" * 100_000 + b"]" * 100_000],
    ids=["5000-digit-integer", "deep-nesting"],
)
def test_rest_answer_json_decoder_limits_are_parse_errors(body: bytes) -> None:
    """Defect: json's ValueError (int digit limit) and RecursionError escaped _decode."""
    rest = RestSlurm(SlurmSettings(backend="rest"), client=httpx.Client())
    with pytest.raises(SlurmParseError, match="GET /x: response is not JSON"):
        rest._decode(httpx.Response(200, content=body), "GET /x")


@pytest.mark.parametrize(
    ("layout", "match"),
    [
        ({"node01": {"gres": ["gpu:a100"]}}, r"layout.node01.gres: expected an object"),
        (
            {"node01": {"gres": {"gpu:a100": {"count": "4", "indexes": "0-3"}}}},
            r"layout.node01.gres.gpu:a100: expected count and indexes",
        ),
        (["node01"], r"jobs\[0\].layout: expected node -> layout"),
        ({"node\n01": {"gres": 1}}, r"layout.node\\n01.gres"),  # a newline stays escaped
    ],
)
def test_pyslurm_layout_of_another_shape(
    recordings: SimpleNamespace, layout: Any, match: str
) -> None:
    """Defect: a list where the layout's ``gres`` object belongs raised AttributeError."""
    job = next(iter(recorded(recordings, "24.11", "pyslurm-24.11_jobs.json").values()))
    stand_in = SimpleNamespace(to_dict=lambda: job, get_resource_layout_per_node=lambda: layout)
    # Issue #40: the job pays (its reason names the field), not the read.
    (read,) = assert_clean(pyslurm_adapter.parts_from, [], [stand_in], [], [], NOW).jobs
    assert read.unreadable.startswith("gpu_allocation: ")
    assert re.search(match, read.unreadable), read.unreadable


def test_parse_error_is_one_line_whatever_the_field_holds() -> None:
    """Field paths carry names from Slurm; a newline or escape in one stays escaped."""
    err = m.parse_error("w", "layout.a\nb\x1b[31m", "bad")
    assert str(err) == "w: layout.a\\nb\\x1b[31m: bad"


# -- found by the fuzz tests ------------------------------------------------------------


@pytest.mark.parametrize("value", ["²", "9" * 5000])
def test_scontrol_text_integer_is_ascii_and_bounded(
    recordings: SimpleNamespace, value: str
) -> None:
    """``NumNodes=²`` / 5,000 digits in ``scontrol show job -d``: ValueError traceback."""
    from slurm_defrag.slurm.parse import scontrol_text

    text = recordings.text("24.11", "scontrol_show_job_-d.txt").replace(
        "NumNodes=1 ", f"NumNodes={value} ", 1
    )
    refused(scontrol_text.jobs, text, "scontrol show job -d", match="NumNodes")


@pytest.mark.parametrize(
    "out",
    ['{"meta": 1' + "1" * 5000 + "}", "[" * 100_000 + "]" * 100_000],
    ids=["5000-digit-integer", "deep-nesting"],
)
def test_cli_json_decoder_limits_are_parse_errors(out: str) -> None:
    """json.loads raises ValueError (int digit limit) / RecursionError, not JSONDecodeError."""
    from slurm_defrag.slurm.cli_backend import CliSlurm

    with pytest.raises(SlurmParseError, match="squeue --json: output is not JSON"):
        CliSlurm.decode(out, "squeue --json")


@pytest.mark.parametrize(
    "hosts", ["gpu[0-99999999]", "g[1-9][1-9][1-9][1-9][1-9][1-9][1-9]", "g[1-2"]
)
def test_admin_host_lists_are_sized_before_expanding(tmp_path: Path, hosts: str) -> None:
    """gres.conf, slurm.conf and topology_templates host lists were expanded eagerly by
    python-hostlist: ``gpu[0-99999999]`` in an admin file is one clear line, not gigabytes."""
    from slurm_defrag.errors import InputError
    from slurm_defrag.slurm.discovery.gres_conf import parse_gres_conf_links
    from slurm_defrag.slurm.discovery.slurm_conf import parse_slurm_conf
    from slurm_defrag.slurm.parse.mapping import expand_config_hosts

    with pytest.raises(InputError, match="bad host list"):
        expand_config_hosts(hosts, "topology_templates")
    with pytest.raises(InputError, match=r"gres\.conf NodeName: bad host list"):
        parse_gres_conf_links(f"NodeName={hosts} Name=gpu File=/dev/nvidia0 Links=-1\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"NodeName={hosts} Gres=gpu:2\n")
    with pytest.raises(InputError, match="bad host list"):
        parse_slurm_conf(conf)
