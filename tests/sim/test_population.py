"""Seeded users and accounts for the trace's jobs (sim/population.py)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from simkit import job

from slurm_defrag.sim.population import Population, with_owners


def test_users_sit_in_accounts_round_robin_by_rank() -> None:
    pop = Population(users=6, accounts=3)
    tree = pop.tree()
    assert [a.key for a in tree.children] == ["a0", "a1", "a2"]
    assert [u.key for u in tree.children[0].children] == ["a0/u00", "a0/u03"]
    assert [u.key for u in tree.users()] == [
        "a0/u00", "a0/u03", "a1/u01", "a1/u04", "a2/u02", "a2/u05",
    ]  # fmt: skip
    assert pop.keys()[4] == "a1/u04"


def test_zipf_weights_fall_as_one_over_rank() -> None:
    w = Population(users=4, zipf_s=1.0).weights()
    assert sum(w) == pytest.approx(1.0)
    assert w[0] / w[1] == pytest.approx(2.0)
    assert w[0] / w[3] == pytest.approx(4.0)


def test_owners_are_drawn_by_the_seed_and_follow_the_weights() -> None:
    jobs = [job(f"j{i}") for i in range(4000)]
    pop = Population(users=10, accounts=2)
    a = with_owners(jobs, pop, np.random.default_rng(1))
    b = with_owners(jobs, pop, np.random.default_rng(1))
    assert [(j.user, j.account) for j in a] == [(j.user, j.account) for j in b]
    counts = Counter(j.user for j in a)
    assert counts["u00"] > counts["u01"] > counts["u09"]
    assert all(j.account == f"a{int(j.user[1:]) % 2}" for j in a)
    assert [j.name for j in a] == [j.name for j in jobs]  # nothing else changes


def test_a_population_needs_at_least_as_many_users_as_accounts() -> None:
    with pytest.raises(ValueError, match="users >= accounts"):
        Population(users=2, accounts=3)
