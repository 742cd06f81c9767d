"""``nvidia-smi topo -m`` and ``nvidia-smi nvlink --status``: the NVLink matrix of one node.

For ``AutoDetect=nvml`` sites: gres.conf has no ``Links=`` and Slurm never prints the links,
so the topology is collected on each GPU node (``slurm-defrag topology collect``) and written
as a small JSON file the service reads (``topology_dir``). Both outputs come from the driver
and are treated as hostile input: anything unexpected is one :class:`TopologyParseError`
naming the source and line, never a guess.

``topo -m`` (GPU rows only; NIC rows/columns, the affinity columns and the legends are
ignored) becomes gres.conf's ``Links=`` convention: one row per GPU, ``-1`` for the GPU
itself, ``0`` for no NVLink (``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``, ``SOC``), ``n``
for ``NVn`` (n bonded NVLinks).

``nvlink --status`` lists each GPU's links as up (``Link 0: 25.781 GB/s``) or down
(``Link 3: <inactive>``), but not which peer a link goes to. The rule applied
(:func:`apply_link_status`): a pair keeps at most as many NVLinks as each of its two GPUs
has up, ``links[i][j] = min(NV#, up(i), up(j))``. So a GPU with every link down (or
NVML's "all links are inActive") loses all its NVLinks; a GPU with some links down keeps its
peers (an NVSwitch GPU with 17 of 18 up stays connected to every peer, NV17), and PCIe cards
whose unused links are inactive by design (H100 NVL: 12 of 18) keep their NV12. A down
link between two directly cabled GPUs (DGX-1) is not attributed to its peer: that needs
``nvidia-smi nvlink -R``, which is not read.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from slurm_defrag.domain.topology import MAX_GPUS_PER_NODE
from slurm_defrag.errors import DefragError, ExitCode, InputError
from slurm_defrag.slurm.command_runner import Runner, subprocess_runner

FORMAT = "slurm-defrag-topology/1"
TOOL = "nvidia-smi topo -m"
TOPO_ARGS = ("topo", "-m")
STATUS_ARGS = ("nvlink", "--status")
MAX_OUTPUT_CHARS = 1_000_000
"""Longer output is refused: a real topo -m of 16 GPUs and 18 NICs is a few kB."""
MAX_NVLINKS = 64
"""Largest NV# accepted (NV18 is the most any GPU has today)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # nvidia-smi underlines the header on a terminal
_GPU = re.compile(r"GPU([0-9]{1,2})", re.ASCII)
_NV = re.compile(r"NV([0-9]{1,3})", re.ASCII)
_NO_NVLINK = frozenset({"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"})
_STATUS_GPU = re.compile(r"GPU ([0-9]{1,2}): .*", re.ASCII)
_STATUS_LINK = re.compile(r"Link ([0-9]{1,2}): (.*)", re.ASCII)
_UP = re.compile(r"[0-9]{1,6}(?:\.[0-9]{1,6})? GB/s", re.ASCII)
_DOWN = frozenset({"<inactive>", "inactive"})
_ALL_DOWN = "all links are inactive"
_NODE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}", re.ASCII)


class TopologyParseError(InputError):
    """``nvidia-smi`` output (or a saved copy) that cannot be read; names source and line."""


class NvidiaSmiUnavailableError(DefragError):
    """``nvidia-smi`` is missing, timed out or failed on this node."""

    exit_code = ExitCode.FAILED


@dataclass(frozen=True)
class GpuTopo:
    """One node's GPU-to-GPU NVLink matrix in gres.conf ``Links=`` convention."""

    gpus: int
    links: list[list[int]]
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LinkStatus:
    """``nvlink --status`` of one GPU: its link numbers that are up and down."""

    up: frozenset[int]
    down: frozenset[int]


def _lines(text: str, source: str) -> list[str]:
    if len(text) > MAX_OUTPUT_CHARS:
        raise TopologyParseError(f"{source}: {len(text)} characters, more than {MAX_OUTPUT_CHARS}")
    # split on newlines only: other line breaks (\v, \f, \x1c..) are control characters
    lines = [line.removesuffix("\r") for line in _ANSI.sub("", text).split("\n")]
    for number, line in enumerate(lines, 1):
        bad = next((c for c in line if (ord(c) < 32 and c != "\t") or ord(c) == 127), None)
        if bad is not None:
            raise TopologyParseError(
                f"{source} line {number}: control character {bad!r} in {line[:60]!r}"
            )
    return lines


def _entry(token: str, i: int, j: int, where: str) -> int:
    if i == j:
        if token != "X":
            raise TopologyParseError(f"{where}: GPU{i} to itself is {token[:20]!r}, expected X")
        return -1
    if token in _NO_NVLINK:
        return 0
    match = _NV.fullmatch(token)
    if match is None:
        raise TopologyParseError(
            f"{where}: GPU{i} to GPU{j} is {token[:20]!r}, expected NV<n>, PIX, PXB, PHB, "
            "NODE or SYS"
        )
    count = int(match[1])
    if not 1 <= count <= MAX_NVLINKS:
        raise TopologyParseError(f"{where}: GPU{i} to GPU{j} is {token}, out of range")
    return count


def _is_header(words: list[str]) -> bool:
    return words[:1] == ["GPU0"] and words[1:2] != ["X"]


def parse_topo_matrix(text: str, source: str = "nvidia-smi topo -m") -> GpuTopo:
    """Read ``nvidia-smi topo -m`` output into the ``Links=`` matrix (module docstring).

    Lines before the header (``GPU0 GPU1 ...``; a pasted shell prompt) are skipped; the GPU
    rows follow in index order; NIC rows and everything from ``Legend:`` on are ignored.
    Columns may be tab- or space-separated.
    """
    lines = _lines(text, source)
    # the header starts with GPU0 as GPU0's row does; in the row the next cell is X
    header_at = next((k for k, line in enumerate(lines) if _is_header(line.split())), None)
    if header_at is None:
        raise TopologyParseError(f"{source}: no header line starting with GPU0 (not topo -m?)")
    header = lines[header_at].split()
    n = 0
    while n < len(header) and header[n] == f"GPU{n}":
        n += 1
    if n < len(header) and _GPU.fullmatch(header[n]):
        raise TopologyParseError(
            f"{source} line {header_at + 1}: column {header[n]!r} after GPU{n - 1}, expected GPU{n}"
        )
    if n > MAX_GPUS_PER_NODE:
        raise TopologyParseError(
            f"{source} line {header_at + 1}: {n} GPUs, at most {MAX_GPUS_PER_NODE} supported"
        )
    rows: dict[int, list[int]] = {}
    for k in range(header_at + 1, len(lines)):
        words = lines[k].split()
        if not words:
            continue
        if words[0] == "Legend:":
            break
        label = _GPU.fullmatch(words[0])
        if label is None:
            continue  # a NIC row (mlx5_0, NIC0, ...): not a GPU-to-GPU link
        where = f"{source} line {k + 1}"
        i = int(label[1])
        if i >= n:
            raise TopologyParseError(f"{where}: row {words[0]} but the header has {n} GPUs")
        if i in rows:
            raise TopologyParseError(f"{where}: second row for {words[0]}")
        if i != len(rows):
            raise TopologyParseError(f"{where}: row {words[0]} before row GPU{len(rows)}")
        if len(words) < n + 1:
            raise TopologyParseError(
                f"{where}: row {words[0]} has {len(words) - 1} entries, expected at least {n}"
            )
        rows[i] = [_entry(words[1 + j], i, j, where) for j in range(n)]
    if len(rows) != n:
        raise TopologyParseError(f"{source}: row GPU{len(rows)} missing ({n} GPUs in header)")
    links = [rows[i] for i in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if links[i][j] != links[j][i]:
                raise TopologyParseError(
                    f"{source}: not symmetric: GPU{i} to GPU{j} is {links[i][j]}, "
                    f"GPU{j} to GPU{i} is {links[j][i]}"
                )
    return GpuTopo(gpus=n, links=links)


def parse_link_status(
    text: str, source: str = "nvidia-smi nvlink --status"
) -> dict[int, LinkStatus]:
    """Read ``nvidia-smi nvlink --status``: per GPU index, its links that are up and down.

    A GPU for which NVML says "all links are inActive" has no up link (and no link
    numbers); a GPU listed without any link line is left out (nothing known).
    """
    status: dict[int, tuple[set[int], set[int], bool]] = {}
    gpu: int | None = None
    for number, line in enumerate(_lines(text, source), 1):
        stripped = line.strip()
        if not stripped:
            continue
        where = f"{source} line {number}"
        head = _STATUS_GPU.fullmatch(stripped)
        if head is not None:
            gpu = int(head[1])
            if gpu in status:
                raise TopologyParseError(f"{where}: GPU {gpu} listed twice")
            status[gpu] = (set(), set(), False)
            continue
        if gpu is None:
            raise TopologyParseError(f"{where}: {stripped[:60]!r} before the first GPU line")
        up, down, _ = status[gpu]
        if _ALL_DOWN in stripped.lower():
            status[gpu] = (up, down, True)
            continue
        link = _STATUS_LINK.fullmatch(stripped)
        if link is None:
            raise TopologyParseError(f"{where}: not a 'Link N: ...' line: {stripped[:60]!r}")
        index, state = int(link[1]), link[2].strip()
        if index in up or index in down:
            raise TopologyParseError(f"{where}: GPU {gpu} link {index} listed twice")
        if _UP.fullmatch(state):
            up.add(index)
        elif state.lower() in _DOWN:
            down.add(index)
        else:
            raise TopologyParseError(
                f"{where}: GPU {gpu} link {index} is {state[:30]!r}, expected 'N GB/s' or "
                "'<inactive>'"
            )
    return {
        g: LinkStatus(frozenset(up), frozenset(down))
        for g, (up, down, all_down) in status.items()
        if up or down or all_down
    }


def apply_link_status(topo: GpuTopo, status: dict[int, LinkStatus], source: str) -> GpuTopo:
    """Cap each pair at the up links of both GPUs (the rule in the module docstring)."""
    for g in status:
        if g >= topo.gpus:
            raise TopologyParseError(f"{source}: GPU {g} but topo -m shows {topo.gpus} GPUs")
    up = {g: len(s.up) for g, s in status.items()}
    links = [row[:] for row in topo.links]
    for i in range(topo.gpus):
        for j in range(topo.gpus):
            if i != j and links[i][j] > 0:
                links[i][j] = min(links[i][j], up.get(i, MAX_NVLINKS), up.get(j, MAX_NVLINKS))
    warnings = list(topo.warnings)
    for g in sorted(status):
        s = status[g]
        if not s.down and s.up:
            continue
        had = [j for j in range(topo.gpus) if j != g and topo.links[g][j] > 0]
        if not had:
            continue  # no NVLink in topo -m anyway (PCIe card without a bridge)
        down = ", ".join(str(k) for k in sorted(s.down)) or "all"
        lost = [j for j in had if links[g][j] == 0]
        capped = [j for j in had if 0 < links[g][j] < topo.links[g][j]]
        what = (
            f"NVLinks to GPU {', '.join(map(str, lost))} dropped"
            if lost
            else f"NVLinks to GPU {', '.join(map(str, capped))} capped at {up[g]}"
            if capped
            else "matrix unchanged (the peer of a down link is not known)"
        )
        warnings.append(f"GPU {g}: NVLink {down} inactive ({len(s.up)} up): {what}")
    return GpuTopo(gpus=topo.gpus, links=links, warnings=warnings)


def run_nvidia_smi(
    nvidia_smi: str, args: Sequence[str], timeout_s: float, runner: Runner = subprocess_runner
) -> str:
    """Run ``nvidia-smi ARGS`` (argv list, timeout); its stdout, or one-line errors."""
    argv = [nvidia_smi, *args]
    what = " ".join(["nvidia-smi", *args])
    try:
        result = runner(argv, timeout_s)
    except FileNotFoundError:
        raise NvidiaSmiUnavailableError(
            f"{what}: command {nvidia_smi!r} not found (run this on a GPU node, or pass "
            "--nvidia-smi PATH or --from-file FILE)"
        ) from None
    except subprocess.TimeoutExpired:
        raise NvidiaSmiUnavailableError(f"{what}: no answer within {timeout_s:g} s") from None
    except OSError as exc:
        raise NvidiaSmiUnavailableError(f"{what}: {exc}") from None
    except UnicodeDecodeError:
        raise TopologyParseError(f"{what}: output is not UTF-8 text") from None
    if result.returncode != 0:
        message = " ".join(((result.stderr or "") or (result.stdout or "")).split())
        raise NvidiaSmiUnavailableError(
            f"{what}: exit status {result.returncode}: {message[:200] or 'no message'}"
        )
    return result.stdout or ""


def collect(
    nvidia_smi: str = "nvidia-smi",
    timeout_s: float = 30.0,
    runner: Runner = subprocess_runner,
    *,
    with_status: bool = True,
) -> GpuTopo:
    """Run ``topo -m`` (and ``nvlink --status``) on this node and read the matrix.

    ``nvlink --status`` failing is not fatal (older drivers, GPUs without NVLink): the
    matrix of ``topo -m`` is kept and a warning says so.
    """
    topo = parse_topo_matrix(run_nvidia_smi(nvidia_smi, TOPO_ARGS, timeout_s, runner))
    if not with_status or not any(v > 0 for row in topo.links for v in row):
        return topo
    try:
        text = run_nvidia_smi(nvidia_smi, STATUS_ARGS, timeout_s, runner)
    except NvidiaSmiUnavailableError as exc:
        return GpuTopo(topo.gpus, topo.links, [*topo.warnings, f"link status not read: {exc}"])
    return apply_link_status(topo, parse_link_status(text), "nvidia-smi nvlink --status")


def short_hostname() -> str:
    return socket.gethostname().split(".", 1)[0]


def default_node_name() -> str:
    """This node's Slurm NodeName: ``$SLURMD_NODENAME`` (prolog, job, HealthCheckProgram
    under slurmd), else the short hostname (NodeName may differ: then pass ``--node``)."""
    return os.environ.get("SLURMD_NODENAME") or short_hostname()


def check_node_name(name: str) -> str:
    """A node name that is safe as a file name (no path, no leading dot)."""
    if not _NODE_NAME.fullmatch(name):
        raise InputError(
            f"--node: {name[:70]!r} is not a node name (letters, digits, '.', '_', '-'; "
            "at most 64; not starting with '.' or '-')"
        )
    return name


def record(node: str, topo: GpuTopo, collected_at: datetime) -> dict[str, object]:
    """The file's content (``slurm-defrag-topology/1``; the reader relies on these keys)."""
    return {
        "format": FORMAT,
        "node": node,
        "gpus": topo.gpus,
        "links": topo.links,
        "tool": TOOL,
        "collected_at": collected_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def write_record(directory: Path, content: dict[str, object]) -> Path:
    """Write ``DIRECTORY/<node>.json`` atomically: a temporary file beside it, then rename.

    A reader never sees a half-written file; the file is world-readable (0644): the service
    usually runs as another user.
    """
    node = check_node_name(str(content["node"]))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"{node}.json"
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{node}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(json.dumps(content, separators=(",", ":")) + "\n")
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise DefragError(f"--output {directory}: cannot write: {exc.strerror or exc}") from None
    return target
