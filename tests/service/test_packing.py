"""Packing: whole-free GPU nodes get heavier, originals are recorded and restored."""

from __future__ import annotations

from pathlib import Path

import pytest

from service_helpers import CycleFactory, FakeClock
from slurm_defrag.domain.cluster import ClusterSnapshot, Job, JobState, Node
from slurm_defrag.packing.node_levers import TIER_SPAN
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import Plans
from slurm_defrag.synth import EPOCH


def _node(name: str, weight: int) -> Node:
    return Node(
        name=name,
        partitions=("batch",),
        state=frozenset({"IDLE"}),
        gpu_model="a100",
        gpu_count=8,
        topology="nvswitch-8",
        weight=weight,
    )


@pytest.fixture
def fake(clock: FakeClock) -> FakeSlurm:
    """g1 runs a 2-GPU job, g2 and g3 are whole free (g3 has a custom weight 7)."""
    job = Job(
        id="1",
        user="u",
        partition="batch",
        state=JobState.RUNNING,
        start_time=EPOCH,
        gpus={"g1": frozenset({0, 1})},
    )
    snap = ClusterSnapshot(
        taken_at=EPOCH, nodes=(_node("g1", 1), _node("g2", 1), _node("g3", 7)), jobs=(job,)
    )
    return FakeSlurm(snap, clock=clock)


def _weights(fake: FakeSlurm) -> dict[str, int]:
    return {n: d["weight"] for n, d in fake.nodes.items()}


def test_whole_free_nodes_are_heavier_and_restored_on_stop(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store
) -> None:
    cycle = make_cycle(packing_bump=1000)
    cycle.run()
    assert _weights(fake) == {"g1": 1, "g2": 1001, "g3": 1007}
    cycle.run()  # nothing more to change: no new commands
    assert sum(c[0] == "update_node" for c in fake.calls) == 2
    # g2 gets a job: it is no longer whole free, back to its original weight.
    fake.jobs["1"]["gpus"] = {"g1": frozenset({0, 1}), "g2": frozenset({0})}
    fake.nodes["g2"]["gpus_used"] = [0]
    cycle.run()
    assert _weights(fake)["g2"] == 1
    cycle.shutdown()
    assert _weights(fake) == {"g1": 1, "g2": 1, "g3": 7}
    cmds = Plans(store.engine).commands()
    assert all(c.argv[:2] == ["scontrol", "update"] for c in cmds)
    assert Plans(store.engine).recent(open_only=True) == []


def test_size_weights_order_nodes_by_gpu_count_and_restore(
    make_cycle: CycleFactory, fake: FakeSlurm
) -> None:
    fake.nodes["g2"].update(gpu_count=2, topology=None)  # a small node: filled first
    cycle = make_cycle(packing_bump=1000, packing_lever="size-weights")
    cycle.run()
    assert _weights(fake) == {"g1": TIER_SPAN + 8, "g2": TIER_SPAN + 2, "g3": 7 * TIER_SPAN + 8}
    cycle.run()  # busy or idle does not matter: nothing more to change
    assert sum(c[0] == "update_node" for c in fake.calls) == 3
    cycle.shutdown()
    assert _weights(fake) == {"g1": 1, "g2": 1, "g3": 7}


def test_shape_weights_put_the_biggest_node_of_a_size_last_and_restore(
    make_cycle: CycleFactory, fake: FakeSlurm
) -> None:
    fake.nodes["g2"].update(gpu_count=2, topology=None)
    fake.nodes["g1"].update(memory_mb=768_000)  # the one 8-GPU node with more memory
    fake.nodes["g3"].update(memory_mb=384_000)
    cycle = make_cycle(packing_bump=1000, packing_lever="shape-weights")
    cycle.run()
    # ranks by (GPUs, CPUs, memory): g2 1, g3 2, g1 3; the admin's weight 7 still first
    assert _weights(fake) == {"g1": TIER_SPAN + 3, "g2": TIER_SPAN + 1, "g3": 7 * TIER_SPAN + 2}
    cycle.shutdown()
    assert _weights(fake) == {"g1": 1, "g2": 1, "g3": 7}


def test_originals_survive_a_crash_and_disabling_restores(
    make_cycle: CycleFactory, fake: FakeSlurm
) -> None:
    make_cycle(packing_bump=1000).run()
    # Restarted (no shutdown: crashed) and packing now off: weights come back from the DB,
    # not from what Slurm shows now (our own changed values).
    make_cycle().run()
    assert _weights(fake) == {"g1": 1, "g2": 1, "g3": 7}


def test_kill_switch_leaves_weights_alone(
    make_cycle: CycleFactory, fake: FakeSlurm, tmp_path: Path
) -> None:
    (tmp_path / "STOP").touch()
    cycle = make_cycle(packing_bump=1000)
    cycle.run()
    cycle.shutdown()
    assert fake.calls == []


def test_packing_records_are_not_plans(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store
) -> None:
    cycle = make_cycle(packing_bump=1000)
    cycle.run()
    assert cycle.history.active_plans() == 0
    assert cycle.executor.open_plans() == []
