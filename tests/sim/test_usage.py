"""Decayed usage (sim/usage.py), charged in the order slurmctld's decay thread charges it."""

from __future__ import annotations

import pytest
from simkit import job

from slurm_defrag.sim.multifactor import MultifactorConfig
from slurm_defrag.sim.usage import UsageLedger, billing

CFG = MultifactorConfig(decay_half_life_s=693.0)  # d = 0.999 per second
D = 0.999


def test_a_running_job_is_charged_each_pass_and_its_last_stretch_when_it_ends() -> None:
    ledger = UsageLedger(CFG, {"a/u": 10.0})
    ledger.started(1, "a/u", 2.0, now=0.0)
    ledger.run(100.0)  # decay the history first, then charge 100 s of the running job
    after_first = 10.0 * D**100 + 2.0 * 100 * D**100
    assert ledger.raw["a/u"] == pytest.approx(after_first)
    ledger.stopped(1, now=150.0)  # the 50 s since the last pass, at once
    assert ledger.raw["a/u"] == pytest.approx(after_first + 2.0 * 50 * D**50)
    ledger.run(200.0)  # everything decays by the 100 s since the last pass, nothing runs
    assert ledger.raw["a/u"] == pytest.approx((after_first + 2.0 * 50 * D**50) * D**100)


def test_without_limits_enforced_the_last_stretch_is_never_charged() -> None:
    # slurmctld charges a job's end only under AccountingStorageEnforce=limits: a job that
    # starts and ends between two passes costs nothing (seen live with 5-second jobs)
    ledger = UsageLedger(MultifactorConfig(decay_half_life_s=693.0, charge_at_end=False))
    ledger.run(100.0)
    ledger.started(1, "a/u", 2.0, now=110.0)
    ledger.stopped(1, now=150.0)
    ledger.started(2, "a/u", 2.0, now=160.0)
    ledger.run(200.0)  # job 2 still runs: its 40 s are charged by the pass
    ledger.stopped(2, now=250.0)  # its last 50 s are not
    assert ledger.raw == {"a/u": pytest.approx(2.0 * 40 * D**40)}


def test_a_job_started_between_passes_is_charged_from_its_start() -> None:
    ledger = UsageLedger(CFG)
    ledger.run(100.0)
    ledger.started(7, "b/v", 1.0, now=130.0)
    ledger.run(200.0)
    assert ledger.raw["b/v"] == pytest.approx(70 * D**70)


def test_billing_counts_whole_cpus_and_gpu_shares() -> None:
    cfg = MultifactorConfig(billing_cpu=1.0, billing_gpu=12.0)
    assert billing(job("j", num=2, cpu=4500), cfg) == pytest.approx(5 + 24)
    assert billing(job("s", num=1, milli=250, cpu=1000), cfg) == pytest.approx(1 + 3)
