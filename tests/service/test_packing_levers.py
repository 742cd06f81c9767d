"""Packer.apply_levers: weights and fit-class features through the writer, restored."""

from __future__ import annotations

from slurm_defrag.actuator.audit import AuditingWriter
from slurm_defrag.actuator.packing import Packer
from slurm_defrag.domain.cluster import ClusterSnapshot, Job, JobState, Node
from slurm_defrag.packing.node_levers import MAX_WEIGHT, LeverSettings
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import Plans
from slurm_defrag.synth import EPOCH


def _node(name: str, weight: int, features: tuple[str, ...] = ()) -> Node:
    return Node(
        name=name,
        partitions=("batch",),
        gpu_model="a100",
        gpu_count=8,
        topology="nvswitch-8",
        weight=weight,
        features=features,
    )


def _fake() -> FakeSlurm:
    job = Job(
        id="1",
        partition="batch",
        state=JobState.RUNNING,
        start_time=EPOCH,
        gpus={"g1": frozenset(range(6))},
    )
    snap = ClusterSnapshot(
        taken_at=EPOCH,
        nodes=(_node("g1", 1, ("ib",)), _node("g2", 1), _node("g3", 7, ("nvme",))),
        jobs=(job,),
    )
    return FakeSlurm(snap)


def test_levers_set_weights_and_features_and_restore_them(store: Store) -> None:
    fake = _fake()
    plans = Plans(store.engine)
    packer = Packer(AuditingWriter(fake, plans, dry_run=False), plans, bump=0)
    changes = packer.apply_levers(fake.snapshot(), LeverSettings("fit-tiers"))
    assert changes > 0
    nodes = fake.nodes
    assert nodes["g1"]["weight"] < nodes["g2"]["weight"] < nodes["g3"]["weight"]
    assert "ib" in nodes["g1"]["features"]
    assert "defrag_fit2" in nodes["g1"]["features"]
    assert "defrag_fit8" in nodes["g2"]["features"]
    assert "defrag_fit2" not in nodes["g2"]["features"]
    assert "nvme" in nodes["g3"]["features"]
    # the same state again: nothing to write
    before = len(fake.calls)
    assert packer.apply_levers(fake.snapshot(), LeverSettings("fit-tiers")) == 0
    assert len(fake.calls) == before
    assert packer.restore() == 3
    assert {n: (d["weight"], d["features"]) for n, d in nodes.items()} == {
        "g1": (1, ["ib"]),
        "g2": (1, []),
        "g3": (7, ["nvme"]),
    }
    argv = [c.argv for c in plans.commands()]
    assert [
        "scontrol",
        "update",
        "NodeName=g1",
        "AvailableFeatures=ib",
        "ActiveFeatures=ib",
    ] in argv


def test_an_idle_bump_never_passes_slurms_largest_weight(store: Store) -> None:
    # scontrol refuses a Weight above 32 bits: a node already at the top stays there.
    snap = ClusterSnapshot(taken_at=EPOCH, nodes=(_node("g1", MAX_WEIGHT), _node("g2", 5)))
    fake = FakeSlurm(snap)
    plans = Plans(store.engine)
    packer = Packer(AuditingWriter(fake, plans, dry_run=False), plans, bump=1000)
    assert packer.apply(fake.snapshot()) == 1
    assert {n: d["weight"] for n, d in fake.nodes.items()} == {"g1": MAX_WEIGHT, "g2": 1005}
