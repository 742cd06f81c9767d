"""The workload mix counted from the cluster's jobs (the fgd-* levers' input)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.packing.fit_classes import TaskClass
from slurm_defrag.packing.workload_mix import MixEstimate, job_class
from slurm_defrag.synth import EPOCH


def _running(jid: str, gpus: dict[str, int], cpus: int = 4) -> Job:
    return Job(
        id=jid,
        state=JobState.RUNNING,
        gpus={n: frozenset(range(k)) for n, k in gpus.items()},
        cpus_per_node=cpus,
    )


def _pending(jid: str, request: GpuRequest | None, cpus: int = 4) -> Job:
    return Job(id=jid, state=JobState.PENDING, request=request, cpus_per_node=cpus)


def test_a_job_counts_as_the_request_of_one_of_its_nodes() -> None:
    assert job_class(_running("1", {"g1": 2})) == TaskClass(4, 2, 1000, 1.0)
    # several nodes: the per-node request (FGD weighs what one node must hold)
    assert job_class(_running("2", {"g1": 8, "g2": 8}, cpus=32)) == TaskClass(32, 8, 1000, 1.0)
    typed = GpuRequest(gpus_per_node=4, gpu_model="h100")
    assert job_class(_pending("3", typed)) == TaskClass(4, 4, 1000, 1.0, frozenset({"h100"}))
    # CPUs only; CPUs unknown count as 1 where the shape is known
    assert job_class(_running("4", {}, cpus=16)) == TaskClass(16, 0, 0, 1.0)
    assert job_class(_pending("5", GpuRequest(gpus_per_node=1), cpus=0)) == TaskClass(
        1, 1, 1000, 1.0
    )


def test_jobs_with_no_readable_shape_are_not_counted() -> None:
    assert job_class(_pending("1", GpuRequest(total_gpus=12))) is None  # spread as Slurm likes
    assert job_class(_pending("2", None, cpus=0)) is None
    assert job_class(_running("3", {}, cpus=0)) is None


def test_each_job_counts_once_and_only_the_most_recent_are_kept() -> None:
    est = MixEstimate(keep=3)
    assert est.mix() is None
    one, two = TaskClass(1, 1, 1000, 1.0), TaskClass(1, 2, 1000, 1.0)
    est.observe([("a", one), ("a", two), ("b", one), ("c", None)])
    mix = est.mix()
    assert mix is not None
    assert mix.types == (TaskClass(1, 1, 1000, 2.0),)
    est.observe([("c", two), ("d", two)])  # "a" is forgotten
    mix = est.mix()
    assert mix is not None
    assert mix.types == (TaskClass(1, 2, 1000, 2.0), TaskClass(1, 1, 1000, 1.0))
    assert len(est) == 3


def test_the_most_common_types_are_kept_in_a_fixed_order() -> None:
    est = MixEstimate(max_types=2)
    est.observe_snapshot(
        ClusterSnapshot(
            taken_at=EPOCH,
            nodes=tuple(Node(name=n, gpu_count=8, gpu_model="a100") for n in ("g1", "g2", "g3")),
            jobs=(
                _running("1", {"g1": 1}),
                _running("2", {"g2": 1}),
                _running("3", {"g3": 4}),
                _pending("4", GpuRequest(gpus_per_node=2)),
            ),
        )
    )
    mix = est.mix()
    assert mix is not None
    # 1-GPU jobs most common; then ties by GPUs, CPUs: 2 GPUs before 4
    assert [(t.gpus, t.weight) for t in mix.types] == [(1, 2.0), (2, 1.0)]


def test_the_long_tail_beyond_the_coverage_is_left_out() -> None:
    est = MixEstimate()  # FGD's artifact: the types covering 95 % of the jobs
    common, rare = TaskClass(1, 1, 1000, 1.0), TaskClass(7, 3, 1000, 1.0)
    est.observe((str(i), common) for i in range(95))
    est.observe((f"r{i}", rare) for i in range(5))
    mix = est.mix()
    assert mix is not None
    assert mix.types == (TaskClass(1, 1, 1000, 95.0),)
    est.observe([("r5", rare)])  # 95 of 101 jobs: not covered without the rare type
    mix = est.mix()
    assert mix is not None
    assert [t.weight for t in mix.types] == [95.0, 6.0]


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        MixEstimate(keep=0)
    with pytest.raises(ValueError, match="coverage"):
        MixEstimate(coverage=0)


@given(
    st.lists(
        st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 4), st.integers(1, 8)),
        max_size=40,
    )
)
def test_the_mix_counts_every_job_once_by_its_first_shape(seen: list[tuple[str, int, int]]) -> None:
    est = MixEstimate(keep=8, coverage=1.0)  # as many as there are ids: none forgotten
    est.observe((jid, TaskClass(cpus, gpus, 1000 if gpus else 0, 1.0)) for jid, gpus, cpus in seen)
    first: dict[str, tuple[int, int]] = {}
    for jid, gpus, cpus in seen:
        first.setdefault(jid, (gpus, cpus))
    kept = list(first.items())
    mix = est.mix()
    if not kept:
        assert mix is None
        return
    assert mix is not None
    assert sum(t.weight for t in mix.types) == len(kept)
    for t in mix.types:
        assert t.weight == sum(1 for _, shape in kept if shape == (t.gpus, t.cpus))


def test_a_job_pushed_out_is_not_counted_again_while_it_stays() -> None:
    nodes = tuple(Node(name=n, gpu_count=8, gpu_model="a100") for n in ("g1", "g2"))
    old = _running("old", {"g1": 8})
    est = MixEstimate(keep=2)
    est.observe_snapshot(ClusterSnapshot(taken_at=EPOCH, nodes=nodes, jobs=(old,)))
    new = (_running("n1", {"g2": 1}), _pending("n2", GpuRequest(gpus_per_node=1)))
    est.observe_snapshot(ClusterSnapshot(taken_at=EPOCH, nodes=nodes, jobs=(old, *new)))
    # "old" was pushed out by two newer jobs; still running, it does not come back
    est.observe_snapshot(ClusterSnapshot(taken_at=EPOCH, nodes=nodes, jobs=(old, *new)))
    mix = est.mix()
    assert mix is not None
    assert [(t.gpus, t.weight) for t in mix.types] == [(1, 2.0)]
