"""Host lists sized before expansion; a user's list only in node-name characters."""

from __future__ import annotations

import pytest

from slurm_defrag.domain.hostlists import expand_user_hosts, hostlist_size


def test_size_counts_top_level_names_and_ranges() -> None:
    assert hostlist_size("a[1,2],b,c[3-4]") == 5
    assert hostlist_size(",".join(f"n{i}" for i in range(60_000))) == 60_000


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("g[1][\n]", "characters"),  # python-hostlist would recurse without end
        ("g[001-002]\ng005", "characters"),  # ... or drop what follows the newline
        ("n[0-99999999]", "more than 65536 names"),
        ("n," * 40_000, "longer than"),
    ],
)
def test_user_lists_refused(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        expand_user_hosts(text)


def test_user_list_expands() -> None:
    assert expand_user_hosts("node[01-02],gpu-7.a") == ("node01", "node02", "gpu-7.a")
