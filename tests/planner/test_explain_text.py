"""Small wording rules of the planner's and the actuator's explanations."""

from __future__ import annotations

import pytest

from slurm_defrag.actuator.voice import ACTUAL, PREVIEW
from slurm_defrag.planner.explain import hours_text


@pytest.mark.parametrize(
    ("gpus", "hours", "shown"),
    [(2, 0.04, "0.04"), (2, 0.3, "0.3"), (6, 5.0, "5.0"), (8, 0.0123, "0.012")],
)
def test_hours_times_gpus_is_the_product_shown(gpus: int, hours: float, shown: str) -> None:
    text = hours_text(gpus, hours)
    assert text == shown
    assert f"{gpus * float(text):.2f}" == f"{gpus * hours:.2f}"


def test_never_zero_hours_for_a_nonzero_loss() -> None:
    # The issue: "2 GPUs x 0.0 h = 0.08 GPU-h".
    assert hours_text(2, 0.04) != "0.0"


def test_the_preview_voice_says_would_and_the_actual_one_did() -> None:
    kw = {"job": "123", "reservation": "defrag-x", "nodes": ("node01",)}
    assert PREVIEW.action("requeue", **kw) == "would requeue job 123"
    assert ACTUAL.action("requeue", **kw) == "requeued job 123"
    assert PREVIEW.action("reserve", **kw) == "would create reservation defrag-x on node01"
    assert ACTUAL.action("reserve", **kw) == "created reservation defrag-x on node01"
    assert PREVIEW.step_done(2, "requeue", "would requeue job 123") == (
        "step 2 requeue (dry-run, not executed): would requeue job 123"
    )
    assert ACTUAL.step_done(2, "requeue", "requeued job 123") == (
        "step 2 requeue done: requeued job 123"
    )
    assert PREVIEW.summary("job 1 on n:[0]", "2").startswith("dry-run, not executed: would serve")
    assert PREVIEW.refused("no such job") == "would be refused: no such job"
    assert ACTUAL.refused("no such job") == "no such job"
    assert (PREVIEW.tag, ACTUAL.tag) == (" (dry-run: not executed)", "")
