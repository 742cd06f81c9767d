"""Protections, table-driven: one job per rule."""

from __future__ import annotations

from datetime import timedelta

import pytest

from slurm_defrag.domain.cluster import Job, JobState
from slurm_defrag.policy.protections import (
    DEFAULT_PROTECTIONS,
    EXTRA_PROTECTIONS,
    MANDATORY_PROTECTIONS,
    Protection,
    ProtectionsConfig,
    compile_protections,
)
from slurm_defrag.synth import EPOCH

NOW = EPOCH


def job(**kw: object) -> Job:
    base: dict[str, object] = {
        "id": "1",
        "name": "train",
        "user": "ann",
        "account": "a",
        "partition": "batch",
        "qos": "normal",
        "state": JobState.RUNNING,
        "start_time": NOW - timedelta(hours=2),
        "gpus": {"n1": frozenset({0})},
    }
    base.update(kw)
    return Job.model_validate(base)


CFG = ProtectionsConfig(
    partitions=["prod"],
    qos=["prod"],
    accounts=["vip"],
    users=["root"],
    job_names=["jupyter-*"],
    min_runtime_minutes=10,
)


@pytest.mark.parametrize(
    ("j", "reason"),
    [
        (job(partition="prod"), "partition=prod"),
        (job(qos="prod"), "QOS=prod"),
        (job(account="vip"), "account=vip"),
        (job(user="root"), "user=root"),
        (job(name="jupyter-lab"), "name=jupyter-lab (matches jupyter-*)"),
        (job(requeue=False), "Requeue=0"),
        (job(start_time=NOW - timedelta(minutes=5)), "running 5 min < min_runtime 10 min"),
        (job(admin_comment="please defrag:protect thanks"), "owner opted out (defrag:protect)"),
        (job(admin_comment="x;defrag:protect"), "owner opted out (defrag:protect)"),
        (job(start_time=None), "no start time"),
    ],
)
def test_default_protections(j: Job, reason: str) -> None:
    assert compile_protections(CFG, NOW).reasons(j) == (reason,)


def test_unprotected() -> None:
    assert compile_protections(CFG, NOW).reasons(job()) == ()


def test_the_opt_out_is_honoured_from_the_admin_comment_only() -> None:
    """job_submit.lua copies an allowed opt-out into the AdminComment, which users cannot
    write: the owner's own Comment alone protects nothing (with `plugins render
    --no-user-protect` the hook drops it, and so must the service)."""
    p = compile_protections(CFG, NOW)
    assert p.reasons(job(comment="defrag:protect")) == ()
    assert p.reasons(job(comment="defrag:protect", admin_comment="defrag:protect")) == (
        "owner opted out (defrag:protect)",
    )


def test_extra_protections_are_off_by_default_and_can_be_enabled() -> None:
    multi = job(gpus={"n1": frozenset({0}), "n2": frozenset({1})})
    assert not compile_protections(CFG, NOW).is_protected(multi)
    cfg = CFG.model_copy(update={"extra": ["multi-node", "no-checkpoint"]})
    p = compile_protections(cfg, NOW)
    assert p.reasons(multi) == ("no checkpoint declared", "spans 2 nodes")
    assert p.reasons(job(comment="defrag:ckpt=2026-11-29T11:00:00Z")) == ()


def test_large_job_protection_counts_gpus_on_one_node() -> None:
    cfg = CFG.model_copy(update={"extra": ["large-job"], "large_job_gpus": 4})
    p = compile_protections(cfg, NOW)
    four = job(gpus={"n1": frozenset(range(4))})
    spread = job(gpus={"n1": frozenset(range(3)), "n2": frozenset(range(3))})
    assert p.reasons(four) == ("holds 4 GPUs on a node (large_job_gpus 4)",)
    assert p.reasons(spread) == ()  # 3 per node: not large by this rule
    assert not compile_protections(CFG, NOW).is_protected(four)


def test_disable_a_default() -> None:
    cfg = CFG.model_copy(update={"disable": ["no-requeue"]})
    assert compile_protections(cfg, NOW).reasons(job(requeue=False)) == ()


def test_sets_are_disjoint_and_complete() -> None:
    assert not DEFAULT_PROTECTIONS & EXTRA_PROTECTIONS
    assert not MANDATORY_PROTECTIONS & (DEFAULT_PROTECTIONS | EXTRA_PROTECTIONS)
    assert set(Protection) == MANDATORY_PROTECTIONS | DEFAULT_PROTECTIONS | EXTRA_PROTECTIONS


UNREADABLE = "gres_request: squeue --json: jobs[8].tres_per_node: cannot parse GRES item"


def test_an_unreadable_record_is_always_protected() -> None:
    """Issue #40: a job whose record a reader could not read whole is never a victim,
    whatever the policy disables; the reason names the part, never the user's text."""
    disabled = CFG.model_copy(update={"disable": sorted(p.value for p in DEFAULT_PROTECTIONS)})
    for cfg in (CFG, ProtectionsConfig(), disabled):
        p = compile_protections(cfg, NOW)
        assert p.reasons(job(unreadable=UNREADABLE)) == ("record unreadable (gres_request)",)
        assert not p.is_protected(job())


@pytest.mark.parametrize("key", ["disable", "extra"])
def test_the_unreadable_record_protection_cannot_be_switched(key: str) -> None:
    with pytest.raises(ValueError, match="'unreadable-record' is always on"):
        ProtectionsConfig.model_validate({key: ["unreadable-record"]})
