"""The work-count guard (issue #42): fixed scenarios do the work recorded for them.

Counts, not timings (see work_counts.py): Python calls, the heap's peak, CP-SAT options,
modules imported. A scenario whose count moves by more than 25 % from
``work_counts.json`` fails until the file is refreshed in the same change, so that the
diff shows what the change costs (or saves). The guard's own test slows a function down
on purpose and checks that the guard notices.
"""

from __future__ import annotations

import pytest
import work_counts
from work_counts import SCENARIOS, compare, measure, recorded


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.slow] if s.slow else []) for n, s in SCENARIOS.items()],
)
def test_the_work_is_what_was_recorded(name: str) -> None:
    problems = compare(name, recorded().get(name), measure(name))
    assert not problems, "\n".join(problems)


def test_every_recorded_scenario_still_exists() -> None:
    assert set(recorded()) == set(SCENARIOS)


@pytest.mark.parametrize(
    ("name", "sabotage", "key"),
    [
        # the regression of issue #42 put back: the protections priced on every node
        ("plan-1k-50", "protection-full-scan", "calls"),
        # a command module importing the planner at start-up again
        ("cli-help", "cli-imports-the-planner", "modules"),
    ],
)
def test_a_deliberately_slowed_function_fails_the_guard(name: str, sabotage: str, key: str) -> None:
    problems = compare(name, recorded()[name], measure(name, sabotage))
    assert any(p.startswith(f"{name}.{key}: ") and "over the recorded" in p for p in problems)


def test_the_band_is_25_percent_either_way() -> None:
    want = {"calls": 1000}
    assert compare("x", want, {"calls": 1250}) == []
    assert compare("x", want, {"calls": 750}) == []
    assert "over the recorded" in compare("x", want, {"calls": 1251})[0]
    assert "under the recorded" in compare("x", want, {"calls": 749})[0]
    assert "no recorded counts" in compare("x", None, {"calls": 1})[0]
    assert work_counts.TOLERANCE == 0.25
