"""Shard use read from recorded Slurm output (``tests/fixtures/shards-<release>/``, written
by ``tests/e2e/test_shards_live.py`` with ``SLURM_DEFRAG_RECORD=1`` on the compose cluster).

22.05 and 24.11 print shard use differently (src/slurm_defrag/domain/gres.py); the cli
backend, reading JSON (cross-checked with the text) or text only, must give the numbers
the live test checks on both. Also: hostile forms of those strings fail by field name.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from test_text_forgery import TEXT_ONLY, Replay

from shard_checks import check_shard_snapshot
from slurm_defrag.domain.gres import GresParseError, shard_count, shard_use
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.failures import SlurmParseError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RELEASES = sorted(p.name.removeprefix("shards-") for p in FIXTURES.glob("shards-*"))


class Scene:
    def __init__(self, release: str) -> None:
        self.dir = FIXTURES / f"shards-{release}"
        meta = json.loads((self.dir / "scene.json").read_text(encoding="utf-8"))
        self.jobs: dict[str, str] = meta["jobs"]
        self.taken_at = datetime.fromisoformat(meta["taken_at"])


def cli(scene: Scene, runner: Replay) -> CliSlurm:
    settings = SlurmSettings(gres_conf=scene.dir / "config" / "gres.conf", cluster_name="defrag")
    return CliSlurm(settings, runner=runner, clock=lambda: scene.taken_at)


def test_the_releases_are_recorded() -> None:
    assert {"22.05", "24.11", "26.05"} <= set(RELEASES)


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("how", ["json", "text"])
def test_recorded_shard_use_is_read(release: str, how: str) -> None:
    scene = Scene(release)
    runner = Replay(scene, how, TEXT_ONLY if how == "text" else {})  # type: ignore[arg-type]
    check_shard_snapshot(cli(scene, runner).snapshot(), scene.jobs)


@pytest.mark.parametrize("release", RELEASES)
def test_who_and_where_each_job_runs_reads_alike_from_json_and_text(release: str) -> None:
    """What the reports group jobs by (issue #44: account, user, partition, QOS, time
    limit) is read from both forms, the same: the recorded jobs ran as account
    ``research``, QOS ``normal``, in partition ``batch``."""
    scene = Scene(release)
    snaps = {
        how: cli(scene, Replay(scene, how, TEXT_ONLY if how == "text" else {})).snapshot()  # type: ignore[arg-type]
        for how in ("json", "text")
    }
    who = {
        how: {j.id: (j.user, j.account, j.partition, j.qos, j.time_limit_s) for j in snap.jobs}
        for how, snap in snaps.items()
    }
    assert who["json"] == who["text"]
    assert who["json"]
    assert {(a, p, q) for _, a, p, q, _ in who["json"].values()} == {
        ("research", "batch", "normal")
    }


@pytest.mark.parametrize(
    ("text", "per_job", "gpus", "counts"),
    [
        # 22.05: the node names the GPUs carrying shards; its count is theirs, not shards'
        ("gpu:h100:2(IDX:1-2),shard:h100:2(IDX:0,4)", False, {0, 4}, None),
        ("shard:3(IDX:0)", True, {0}, {0: 3}),
        ("shard:6(IDX:0-1)", True, {0, 1}, {0: 3, 1: 3}),  # split not said: evenly, up
        ("gpu:h100:0(IDX:N/A),shard:h100:0(IDX:N/A)", False, set(), {}),
        # 24.11: used/configured per GPU
        ("shard:h100:5(3/4,0/4,2/4)", False, {0, 2}, {0: 3, 2: 2}),
        ("gpu:a100:8(IDX:0-7)", False, set(), {}),
        # 26.05: "-" for a GPU a whole-GPU job holds
        ("gpu:h100:2(IDX:4,6),shard:h100:3(3/4,0/4,0/4,0/4,-/4,0/4,-/4,0/4)", False, {0}, {0: 3}),
    ],
)
def test_shard_forms(text: str, per_job: bool, gpus: set[int], counts: object) -> None:
    use = shard_use(text, per_job=per_job)
    assert use.gpus == gpus
    assert use.counts == counts


@pytest.mark.parametrize(
    "text",
    [
        "shard:h100:5(5/4,0/4)",  # more used than the GPU has
        "shard:h100:5(3/x)",
        "shard:h100:5(3/-)",
        "shard:h100:5(--/4)",
        "shard:h100:5(" + ",".join(["0/4"] * 17) + ")",  # more GPUs than a node has
        "shard:h100:5(99999999999/4)",
        "shard:3(IDX:0-99999999)",
    ],
)
def test_hostile_shard_strings_are_refused(text: str) -> None:
    with pytest.raises(GresParseError):
        shard_use(text, per_job=True)


def test_a_bad_shard_string_names_the_field() -> None:
    scene = Scene(RELEASES[-1])
    path = scene.dir / "text" / "scontrol_show_node_-d.txt"
    broken = path.read_text(encoding="utf-8").replace("shard:h100:", "shard:h100:7(9/4)x", 1)
    runner = Replay(scene, "text", {**TEXT_ONLY, "scontrol show node -d": broken})  # type: ignore[arg-type]
    with pytest.raises(SlurmParseError, match=r"nodes\[3\]\.Gres"):
        cli(scene, runner).snapshot()


def test_configured_and_asked_counts() -> None:
    assert shard_count("gpu:h100:8(S:0-1),shard:h100:32(S:0-1)") == 32
    assert shard_count("gres:shard:3") == shard_count("gres/shard:3") == 3
    assert shard_count("gres/gpu:2") == 0
