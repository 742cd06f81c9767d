"""Shared rules for the hostile-input fuzz tests (import as ``from fuzzing import ...``).

Every parser of Slurm output and every file loader must, on any input, either return or
raise one of the project's own errors (:class:`~slurm_defrag.errors.DefragError`: one line,
no traceback) — and do so in bounded memory.

``FUZZ_EXAMPLES`` is 10,000 under ``CI=true`` (the hostile-input issue's bar) and 300
elsewhere, so a developer's run stays quick; ``SLURM_DEFRAG_FUZZ_EXAMPLES`` overrides both.

Memory is bounded per case by the process's peak resident set (Linux: reset through
``/proc/self/clear_refs``, read as ``VmHWM``) rather than by tracemalloc: tracing every
allocation made the fuzz about 2.3x slower, and at 10,000 cases per parser that was most
of the test command's CPU (docs/benchmarks.md). The resident-set peak counts C-level
allocations too (yaml, tomllib, the JSON decoder). What it cannot see is memory the
process already holds free: glibc's is handed back before each case (``malloc_trim``);
pymalloc's free blocks and pools (after a test that built and dropped millions of small
objects) are counted instead, as if the case had taken all of them — and when they are
more than :data:`MAX_HIDDEN_BYTES`, that case is measured with tracemalloc. So the bound
is never looser than tracemalloc's. Where ``/proc/self/clear_refs`` is not writable,
tracemalloc is used throughout.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from infra import IN_CI
from slurm_defrag.errors import DefragError

FUZZ_EXAMPLES = int(os.environ.get("SLURM_DEFRAG_FUZZ_EXAMPLES", 10_000 if IN_CI else 300))

MAX_PEAK_BYTES = 64 * 1024 * 1024
"""Peak memory one parse may add. Inputs are at most a few kB, so anything near this means
work grows with a number from the input (e.g. an unbounded index range)."""

MAX_HIDDEN_BYTES = 16 * 1024 * 1024
"""Most free pymalloc memory a case may start with and still be measured by its resident
set (it is added to the case's growth); beyond it, tracemalloc measures the case."""

MAX_SETUP_S = 0.005
"""Most the resident-set measurement may cost a case before this process switches to
tracemalloc for good."""
_RSS_TOO_DEAR = False
_SETUP_WINDOW = 50  # cases averaged (CPU time, so a busy machine does not decide it)
_SETUP_COSTS: list[float] = []
MODES = [0, 0]
"""Cases measured by tracemalloc, by the resident set (for tests/project/test_fuzz_guard.py
and for whoever wonders which one ran)."""

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")
_LIBC_NAME = ctypes.util.find_library("c")
_LIBC = ctypes.CDLL(_LIBC_NAME) if _LIBC_NAME else None


def _status_kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def pymalloc_free_bytes() -> int:
    """Bytes pymalloc holds free (available blocks + unused pools): a case can take them
    without the resident set growing. From ``sys._debugmallocstats`` (C stderr, ~1 ms)."""
    with tempfile.TemporaryFile() as out:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode(errors="replace")
    free = 0
    for line in text.splitlines():
        if line.startswith("# bytes in available blocks") or " unused pools * " in line:
            free += int(line.rsplit("=", 1)[1].strip().replace(",", ""))
    return free


def _rss_peak_available() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
        _status_kib("VmHWM")
    except (OSError, KeyError):
        return False
    return _LIBC is not None and hasattr(_LIBC, "malloc_trim")


RSS_PEAK = _rss_peak_available()
"""True where the per-case bound is the resident-set peak (Linux), else tracemalloc."""


@contextmanager
def peak_growth() -> Iterator[list[int]]:
    """Measure how far memory rose above where it stood at entry, in bytes.

    Yields a one-element list that holds the growth after the block (a list, so the
    value can be read after an exception left the block)."""
    global _RSS_TOO_DEAR
    box = [0]
    hidden = MAX_HIDDEN_BYTES + 1
    if RSS_PEAK and not _RSS_TOO_DEAR:
        assert _LIBC is not None
        started = time.process_time()
        gc.collect(0)
        _LIBC.malloc_trim(0)
        hidden = pymalloc_free_bytes()
        # malloc_trim walks the whole heap: in a process that built a large one earlier
        # (a 10,000-node plan) it costs ~50 ms, more than tracemalloc; from then on this
        # process measures with tracemalloc. (scripts/test.sh gives the fuzz tests fresh
        # worker processes, where it costs microseconds.)
        _SETUP_COSTS.append(time.process_time() - started)
        if len(_SETUP_COSTS) == _SETUP_WINDOW:
            _RSS_TOO_DEAR = sum(_SETUP_COSTS) / _SETUP_WINDOW > MAX_SETUP_S
            _SETUP_COSTS.clear()
    MODES[hidden <= MAX_HIDDEN_BYTES] += 1
    if hidden <= MAX_HIDDEN_BYTES:
        start = _status_kib("VmRSS")
        _CLEAR_REFS.write_text("5")  # VmHWM := the current resident set
        try:
            yield box
        finally:
            box[0] = max(0, _status_kib("VmHWM") - start) * 1024 + hidden
    else:
        tracemalloc.start()
        try:
            yield box
        finally:
            box[0] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()


FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=IN_CI,  # CI: the same cases every run, so a failure reproduces
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
"""Decorator for every fuzz test: ``@FUZZ`` under ``@given(...)``."""


def assert_clean(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``; only a :class:`DefragError` may escape, and memory stays bounded.

    Returns what ``fn`` returned, or None when it raised a DefragError (whose message must
    be a single line). Any other exception propagates: that is the bug a fuzz test finds.
    """
    error: DefragError | None = None
    result = None
    with peak_growth() as peak:
        try:
            result = fn(*args, **kwargs)
        except DefragError as exc:
            error = exc
    assert peak[0] < MAX_PEAK_BYTES, f"peak {peak[0] / 2**20:.0f} MiB for one input"
    if error is not None:
        message = str(error)
        assert message.strip(), f"{type(error).__name__} with an empty message"
        assert "\n" not in message, f"multi-line error message: {message!r}"
    return result
