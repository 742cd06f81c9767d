"""Fair Tree (sim/fair_tree.py): the ranks slurmctld's fair_tree.c gives, worked by hand."""

from __future__ import annotations

import pytest

from slurm_defrag.sim.fair_tree import Assoc, fair_tree, usage_totals, user_key


def user(account: str, name: str, shares: int = 1) -> Assoc:
    return Assoc(user_key(account, name), shares=shares, user=True)


def account(name: str, *children: Assoc, shares: int = 1) -> Assoc:
    return Assoc(name, shares=shares, children=children)


def test_the_less_served_account_ranks_all_its_users_first() -> None:
    # A used 40 of 60 for half the shares (LF 0.75), B 20 of 60 (LF 1.5): B's user first;
    # inside A, a2 used a quarter of A's usage for half of A's shares (LF 2), a1 3/4 (LF 2/3)
    root = account(
        "root", account("A", user("A", "a1"), user("A", "a2")), account("B", user("B", "b1"))
    )
    res = fair_tree(root, {"A/a1": 30.0, "A/a2": 10.0, "B/b1": 20.0})
    assert res.factors == pytest.approx({"B/b1": 1.0, "A/a2": 2 / 3, "A/a1": 1 / 3})
    assert res.level_fs["A"] == pytest.approx(0.75)
    assert res.level_fs["B"] == pytest.approx(1.5)
    assert res.level_fs["A/a2"] == pytest.approx(2.0)


def test_users_without_usage_tie_at_the_top_and_the_next_user_keeps_its_own_rank() -> None:
    root = account("root", account("A", user("A", "u1"), user("A", "u2"), user("A", "u3")))
    res = fair_tree(root, {"A/u3": 5.0})
    # u1 and u2: LF infinite, the same rank 3; u3 gets rank 1 (ranks are not compressed)
    assert res.factors == pytest.approx({"A/u1": 1.0, "A/u2": 1.0, "A/u3": 1 / 3})


def test_an_account_tied_with_a_user_gives_its_best_user_that_users_rank() -> None:
    root = account(
        "root",
        account("B", user("B", "z")),
        user("root", "r"),
        account("A", user("A", "x"), user("A", "y")),
    )
    res = fair_tree(root, {"B/z": 10.0})
    # r and A both unused (LF infinite): the user first, A tied with it, so x and y (tied
    # among themselves) share r's rank 4; B next, z at rank 1 of 4
    assert res.factors == pytest.approx({"root/r": 1.0, "A/x": 1.0, "A/y": 1.0, "B/z": 0.25})


def test_tied_accounts_are_walked_one_after_the_other_the_second_starting_tied() -> None:
    root = account(
        "root",
        account("A", user("A", "a"), user("A", "a2")),
        account("B", user("B", "b"), user("B", "b2")),
    )
    res = fair_tree(root, {"A/a": 4.0, "A/a2": 1.0, "B/b": 4.0, "B/b2": 1.0})
    # A and B tie (LF 1); A first (tree order): a2 rank 4, a rank 3; B starts tied, so b2
    # keeps rank 3, then b takes what is left (rank 1)
    assert res.factors == pytest.approx({"A/a2": 1.0, "A/a": 0.75, "B/b2": 0.75, "B/b": 0.25})


def test_shares_weigh_the_level_fair_share() -> None:
    root = account(
        "root", account("big", user("big", "p"), shares=3), account("small", user("small", "q"))
    )
    # equal usage: big holds 3/4 of the shares for half the usage (LF 1.5), small 1/2
    res = fair_tree(root, {"big/p": 1.0, "small/q": 1.0})
    assert res.level_fs["big"] == pytest.approx(1.5)
    assert res.level_fs["small"] == pytest.approx(0.5)
    assert res.factors == pytest.approx({"big/p": 1.0, "small/q": 0.5})


def test_zero_shares_rank_last_whatever_the_usage() -> None:
    root = account("root", account("A", user("A", "none", shares=0), user("A", "some")))
    res = fair_tree(root, {"A/some": 100.0})
    assert res.factors == pytest.approx({"A/some": 1.0, "A/none": 0.5})


def test_account_usage_is_the_sum_of_its_users() -> None:
    root = account("root", account("A", user("A", "a1"), user("A", "a2")))
    assert usage_totals(root, {"A/a1": 2.0, "A/a2": 3.0}) == {
        "A/a1": 2.0,
        "A/a2": 3.0,
        "A": 5.0,
        "root": 5.0,
    }


def test_a_user_association_has_no_children() -> None:
    with pytest.raises(ValueError, match="no children"):
        Assoc("x", user=True, children=(Assoc("y", user=True),))
