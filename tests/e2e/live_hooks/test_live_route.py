"""Live: per-job routing (the fgd-route levers) in a real slurmctld.

What the simulator assumes and this records on each release:

* slurmctld loads job_submit.lua with a ``route`` entry in defrag_nodes.lua, and a node
  carrying its own feature (``defrag_at_<node>``, set with ``scontrol update`` as the
  service would) gets the job the script names in ``--prefer``, although cons_tres's own
  order would pick another node;
* the script's Lua state lives between submissions: a job it routed is taken off its copy
  of the table, so the next submission sees it (the whole point of a per-job decision);
* touching job_submit.lua reloads the table and resets that copy (what a new cycle does).

The table is made by hand here: node03 is shown running a 1-GPU job (it is really idle),
every other node idle, nodes in slurm.conf order.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.plugins_support import (
    Cluster,
    Installed,
    own_features,
    pack_entry,
    reload_script,
    set_node_features,
    table_with,
)

from .test_live_packing import features, node_of

pytestmark = pytest.mark.slurm

TARGET = "node03"
NODES = ("node01", "node02", "node03", "node04")


def _route_entry() -> str:
    nodes = []
    for name in NODES:
        free = "0, " + ", ".join(["1000"] * 7) if name == TARGET else ", ".join(["1000"] * 8)
        nodes.append(
            f"{{ feature = 'defrag_at_{name}', model = '', free = {{ {free} }}, "
            f"cpus = 32, mem = -1, idle = {'false' if name == TARGET else 'true'} }}"
        )
    return (
        "  route = { step = 40, shards_per_gpu = 1000,\n"
        "    mix = { { cpus = 1, gpus = 1, milli = 1000, weight = 0.5 },\n"
        "            { cpus = 1, gpus = 8, milli = 1000, weight = 0.5 } },\n"
        "    nodes = {\n      " + ",\n      ".join(nodes) + " } },\n"
    )


def _prefer_then_node(c: Cluster, *opts: str) -> tuple[str, str]:
    """Submit held (a running job no longer shows Prefer=), read it, release, wait."""
    rc, job, err = c.sbatch("-H", *opts)
    assert rc == 0, err
    prefer = c.job_field(job, "Prefer")
    c.run("scontrol", "release", job)
    return prefer, node_of(c, job)


@pytest.fixture
def routed(installed: Installed, tmp_path: Path) -> Iterator[Cluster]:
    c = installed.cluster
    idle = c.sh("sinfo -h -N -p batch -t idle -o '%N' | sort -u").split()
    assert set(NODES) <= set(idle), f"need {NODES} idle in batch, have {idle}"
    own = {n: features(c, n)[0] for n in NODES}
    try:
        for n in NODES:
            set_node_features(c, n, [*own_features(own[n]), f"defrag_at_{n}"])
        with table_with(c, tmp_path, _route_entry()):
            yield c
    finally:
        for n in NODES:
            set_node_features(c, n, own_features(own[n]))


def test_the_script_names_one_node_per_job_and_remembers_it(routed: Cluster) -> None:
    c = routed
    # 1 GPU: the node the table shows in use, not cons_tres's first node (node01)
    prefer, node = _prefer_then_node(c, "--gres=gpu:1", "-c", "1")
    assert (prefer, node) == (f"defrag_at_{TARGET}", TARGET)
    # 7 GPUs: in the table node03 has 7 free (an exact fit) but in the script's copy only
    # 6 after the job above; the copy is what counts, so a whole idle node gets it
    prefer, node = _prefer_then_node(c, "--gres=gpu:7", "-c", "1")
    assert prefer == "defrag_at_node01", "the script forgot the job it routed"
    assert node == "node01"
    c.cleanup_jobs()
    # a new table (touch): the copy starts again from it
    reload_script(c)
    prefer, node = _prefer_then_node(c, "--gres=gpu:7", "-c", "1")
    assert (prefer, node) == (f"defrag_at_{TARGET}", TARGET)


def test_a_preference_is_tried_in_place_of_the_constraint(
    installed: Installed, tmp_path: Path
) -> None:
    """Recorded (22.05.8, 24.11): a job with ``--constraint=X --prefer=Y`` runs on a free
    node with Y and *without* X, so a hint added to a job with its own constraint would
    override the user's constraint. job_submit.lua therefore gives no hint to a job that
    names its own placement (--constraint, -w, -x, --reservation, --prefer)."""
    c = installed.cluster
    pair = ("node01", "node02")
    own = {n: features(c, n)[0] for n in pair}
    try:
        set_node_features(c, "node02", [*own_features(own["node02"]), "defrag_rec_x"])
        set_node_features(c, "node01", [*own_features(own["node01"]), "defrag_rec_y"])
        rc, job, err = c.sbatch(
            "--constraint=defrag_rec_x", "--prefer=defrag_rec_y", "--gres=gpu:1"
        )
        assert rc == 0, err
        assert node_of(c, job) == "node01", "Slurm kept the constraint: record the new behaviour"
        c.cleanup_jobs()
        # the hook: the packing hint (here naming node01's defrag_rec_y) for a plain 1-GPU
        # job, none for a constrained one
        with table_with(c, tmp_path, pack_entry("defrag_rec_y")):
            rc, plain, err = c.sbatch("-H", "--gres=gpu:1")
            assert rc == 0, err
            assert c.job_field(plain, "Prefer") == "defrag_rec_y"
            rc, constrained, err = c.sbatch("-H", "--constraint=defrag_rec_x", "--gres=gpu:1")
            assert rc == 0, err
            assert c.job_field(constrained, "Prefer") in ("", "(null)")
    finally:
        c.cleanup_jobs()
        for n in pair:
            set_node_features(c, n, own_features(own[n]))
