"""Fair Tree: the fair-share factor slurmctld gives each user association (the default
fair-share algorithm of priority/multifactor since Slurm 19.05).

Written from ``src/plugins/priority/multifactor/fair_tree.c`` (``_calc_tree_fs``,
``_calc_assoc_fs``, ``_cmp_level_fs``):

* every association (account or user) gets a level fair-share ``LF = S / U`` among its
  siblings: ``S`` its shares over its siblings' (``shares_raw / level_shares``), ``U`` its
  raw usage over its parent's; ``U == 0`` gives infinity (never used: first), ``S == 0``
  gives 0;
* siblings are visited by ``LF``, highest first, a user before an account on a tie; an
  account is descended into where it stands, so every user of a better-served account
  ranks below every user of a less-served one;
* users are ranked in that walk, from ``n`` (the number of user associations) down; the
  factor is ``rank / n``. A user tied with the previous sibling (same ``LF``) keeps its
  rank; an account tied with the previous sibling starts its walk tied (its best user
  shares the rank).

Tied *accounts* are not merged: ``_count_tied_accounts`` stops at the first account that
follows (``if (!next_assoc->user) break;``, in every release read), so in practice each
account is walked on its own, the later one starting tied. Python's sort is stable, as
glibc's ``qsort`` (a merge sort) is in practice: ties keep the tree's order.

Pure: the tree and the raw usage in, the factors out. The simulator feeds it its own
usage (:mod:`slurm_defrag.sim.usage`); the live cross-check feeds it ``sshare``'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Assoc:
    """One association: an account (with children) or a user (a leaf, ``user=True``).

    ``key`` names it in the usage mapping: a user association is ``account/user`` (a user
    may sit in several accounts), an account its name."""

    key: str
    shares: int = 1
    """``sacctmgr ... Fairshare=`` (RawShares); 1 is sacctmgr's default."""
    user: bool = False
    children: tuple[Assoc, ...] = ()

    def __post_init__(self) -> None:
        if self.shares < 0:
            raise ValueError(f"association {self.key}: negative shares")
        if self.user and self.children:
            raise ValueError(f"association {self.key}: a user association has no children")

    def users(self) -> Iterator[Assoc]:
        """Every user association below (and including) this one, in tree order."""
        if self.user:
            yield self
        for c in self.children:
            yield from c.users()


def user_key(account: str, user: str) -> str:
    """The usage key of ``user``'s association in ``account``."""
    return f"{account}/{user}"


@dataclass
class FairTreeResult:
    factors: dict[str, float] = field(default_factory=dict)
    """User association key -> fair-share factor (0, 1]."""
    level_fs: dict[str, float] = field(default_factory=dict)
    """Every association's ``LF`` (sshare's LevelFS), for reading and cross-checks."""


def usage_totals(root: Assoc, usage: Mapping[str, float]) -> dict[str, float]:
    """Raw usage of every association: a user's from ``usage`` (0 when absent), an
    account's the sum of its children's (slurmctld adds a job's usage to its association
    and every parent, and decays all alike, so the sums hold)."""
    out: dict[str, float] = {}

    def total(a: Assoc) -> float:
        v = float(usage.get(a.key, 0.0)) if a.user else sum(total(c) for c in a.children)
        out[a.key] = v
        return v

    total(root)
    return out


def _level_fs(shares: int, level_shares: int, used: float, parent_used: float) -> float:
    s = shares / level_shares if level_shares else 0.0
    u = used / parent_used if parent_used else 0.0
    if s == 0.0:
        return 0.0
    return math.inf if u == 0.0 else s / u


def fair_tree(root: Assoc, usage: Mapping[str, float]) -> FairTreeResult:
    """The fair-share factor of every user association under ``root`` (the cluster's root
    association), given each user association's raw usage."""
    totals = usage_totals(root, usage)
    n_users = sum(1 for _ in root.users())
    result = FairTreeResult()
    rank = rnt = n_users

    def walk(parent: Assoc, account_tied: bool) -> None:
        nonlocal rank, rnt
        level_shares = sum(c.shares for c in parent.children)
        lf = {
            c.key: _level_fs(c.shares, level_shares, totals[c.key], totals[parent.key])
            for c in parent.children
        }
        result.level_fs.update(lf)
        # highest LF first; on a tie a user before an account (_cmp_level_fs)
        ordered = sorted(parent.children, key=lambda c: (-lf[c.key], not c.user))
        prev: float | None = None
        for i, c in enumerate(ordered):
            tied = account_tied if i == 0 else prev == lf[c.key]
            if c.user:
                if not tied:
                    rank = rnt
                result.factors[c.key] = rank / n_users
                rnt -= 1
            else:
                walk(c, tied)
            prev = lf[c.key]

    if n_users:
        walk(root, False)
    return result
