"""Shared rules for the hostile-input fuzz tests (import as ``from fuzzing import ...``).

Every parser of Slurm output and every file loader must, on any input, either return or
raise one of the project's own errors (:class:`~slurm_defrag.errors.DefragError`: one line,
no traceback) — and do so in bounded memory.

``FUZZ_EXAMPLES`` is 10,000 under ``CI=true`` (the hostile-input issue's bar) and 300
elsewhere, so a developer's run stays quick; ``SLURM_DEFRAG_FUZZ_EXAMPLES`` overrides both.
"""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings

from infra import IN_CI
from slurm_defrag.errors import DefragError

FUZZ_EXAMPLES = int(os.environ.get("SLURM_DEFRAG_FUZZ_EXAMPLES", 10_000 if IN_CI else 300))

MAX_PEAK_BYTES = 64 * 1024 * 1024
"""Peak Python heap one parse may allocate. Inputs are at most a few kB, so anything near
this means work grows with a number from the input (e.g. an unbounded index range)."""

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
    tracemalloc.start()
    try:
        result = fn(*args, **kwargs)
    except DefragError as exc:
        error = exc
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < MAX_PEAK_BYTES, f"peak {peak / 2**20:.0f} MiB for one input"
    if error is not None:
        message = str(error)
        assert message.strip(), f"{type(error).__name__} with an empty message"
        assert "\n" not in message, f"multi-line error message: {message!r}"
    return result
