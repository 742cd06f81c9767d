"""Live: the simulator's priority/multifactor against slurmctld's, factor by factor (#41).

What it does, on the compose cluster (accounting in slurmdbd, Fair Tree the default
fair-share algorithm), holding ``exclusive_cluster()``:

1. gives the test users different usage: alice runs 32 CPUs and bob 16 for a few seconds
   (usage is tracked whatever the weights), then waits until both have ended;
2. switches slurm.conf to a documented weighting (:data:`PRIORITY_LINES`: fair-share
   dominant, age, job size with ``PriorityFavorSmall=YES``, partition through each
   partition's ``PriorityJobFactor``, QOS through the ``prod`` QOS's priority) and restarts
   slurmctld, whose decay thread then computes every association's fair-share at once;
3. blocks node01 with a job of ours (all eight GPUs, in ``high``: not preemptible) and
   submits a seeded sequence of jobs by alice, bob and carol to node01, each asking for all
   eight GPUs, with seeded CPUs, partition, QOS and ``--nice``: they stay pending;
4. reads ``sprio`` (each weighted factor and the priority), ``sshare`` (raw usage and the
   fair-share factor of every association), ``sacctmgr`` (the association tree and shares,
   QOS priorities), ``scontrol`` (partition job factors, nodes and CPUs, each job's
   AccrueTime) and computes every job's factors with the simulator's model
   (:mod:`slurm_defrag.sim.fair_tree`, :mod:`slurm_defrag.sim.multifactor`) from the same
   inputs: at least 95 % of the jobs must match sprio on every factor as sprio rounds it,
   and on the priority within 1 (the age's fraction moves its cut);
5. cancels the blocker: the jobs (one second each) run one after another in Slurm's order;
   the order the model predicts (partition ``PriorityTier``, then priority, submit time,
   job id: the order slurmctld documents) must agree with the start order on at least 90 %
   of the pairs of jobs;
6. restores slurm.conf and restarts slurmctld, whatever happened (the original is kept on
   this host; ``docker cp`` works on a stopped container too).

About two minutes: two slurmctld restarts, ~10 s of usage jobs, ~30 s of one-second jobs;
every wait polls for its event. Run it (``scripts/cluster.sh up`` first)::

    SLURM_SUITE=bookworm .venv/bin/pytest -m slurm tests/e2e/test_priority_crosscheck_live.py -v -s

Written for 22.05 and 24.11 (the compose suites); ``-s`` prints every job's factors,
Slurm's and the model's.
"""

from __future__ import annotations

import random
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import pytest
from live_cluster import DOCKER, ctld, exclusive_cluster, has_accounting

from plugins.plugins_support import ETC, Cluster, require
from slurm_defrag.sim.fair_tree import Assoc, fair_tree, user_key
from slurm_defrag.sim.multifactor import DAY, ClusterSize, MultifactorConfig, job_factors

pytestmark = pytest.mark.slurm

NAME = "defrag-prio-test"
NODE = "node01"
PART_FACTOR = {"batch": 1, "high": 4}
"""``PriorityJobFactor`` the test gives the compose partitions (batch: tier 1, high: 10)."""
CFG = MultifactorConfig(
    weight_age=1000,
    weight_fairshare=10000,
    weight_jobsize=1000,
    weight_partition=1000,
    weight_qos=2000,
    max_age_s=14 * DAY,
    decay_half_life_s=14 * DAY,
    calc_period_s=60.0,
    favor_small=True,
)
PRIORITY_LINES = (
    "PriorityType=priority/multifactor",
    f"PriorityWeightFairshare={CFG.weight_fairshare}",
    f"PriorityWeightAge={CFG.weight_age}",
    f"PriorityWeightJobSize={CFG.weight_jobsize}",
    f"PriorityWeightPartition={CFG.weight_partition}",
    f"PriorityWeightQOS={CFG.weight_qos}",
    "PriorityMaxAge=14-0",
    "PriorityDecayHalfLife=14-0",
    "PriorityCalcPeriod=1",
    "PriorityFavorSmall=YES",
    # A job's usage is charged when it ends only under ``limits`` (acct_policy.c:
    # _adjust_limit_usage calls priority_g_job_end for ACCOUNTING_ENFORCE_LIMITS alone);
    # without it the decay thread charges running jobs once a period and a 5-second job
    # between two passes is never charged: the usage step did nothing, or only what
    # other tests' long jobs had left (fair-share gaps 0 and -3333 in CI runs).
    "AccountingStorageEnforce=associations,limits,qos",
)
_OURS = re.compile(
    r"(?i)^\s*(Priority(Type|Weight\w+|MaxAge|DecayHalfLife|CalcPeriod|FavorSmall|Flags)"
    r"|AccountingStorageEnforce)\s*="
)
JOBS = 16
SEED = 41


def with_priority(conf: str) -> str:
    """slurm.conf text with the test's priority settings (where its own stood, before
    the node and partition lines) and partition job factors."""
    out: list[str] = []
    placed = False
    for line in conf.splitlines():
        if _OURS.match(line) or (not placed and re.match(r"\s*(NodeName|PartitionName)=", line)):
            if not placed:
                out += PRIORITY_LINES
                placed = True
            if _OURS.match(line):
                continue
        m = re.match(r"\s*PartitionName=(\S+)", line)
        if m and m[1] in PART_FACTOR:
            line = re.sub(r"\s*PriorityJobFactor=\S+", "", line)
            line += f" PriorityJobFactor={PART_FACTOR[m[1]]}"
        out.append(line)
    return "\n".join(out if placed else [*out, *PRIORITY_LINES]) + "\n"


@contextmanager
def priority_config(cluster: Cluster, tmp: Path) -> Iterator[None]:
    """slurm.conf with :data:`PRIORITY_LINES`, slurmctld restarted; the original back (and
    slurmctld restarted, or started if it had stopped) whatever happens."""
    original = tmp / "slurm.conf.original"
    cluster.cp_out(f"{ETC}/slurm.conf", original)
    before = cluster.config().get("PriorityWeightFairShare", "0")
    container_id = cluster.container_id()
    nodes = cluster.responding_nodes()
    conf = tmp / "slurm.conf"
    conf.write_text(with_priority(original.read_text(encoding="utf-8")), encoding="utf-8")
    try:
        cluster.cp_in(conf, f"{ETC}/slurm.conf")
        cluster.restart(nodes)
        yield
    finally:
        if cluster.container_id() == container_id:  # not recreated meanwhile
            if cluster.running():
                cluster.run("scancel", "-n", NAME, check=False)
            cluster.cp_in(original, f"{ETC}/slurm.conf")
            if cluster.running():
                cluster.restart(nodes)
            else:
                subprocess.run(
                    [DOCKER, "start", cluster.container],
                    check=True,
                    capture_output=True,
                    timeout=120,
                )
                cluster.wait_up(nodes)
            after = cluster.config().get("PriorityWeightFairShare", "")
            assert after == before, f"slurm.conf restore not in effect: {after!r}"


# -- reading Slurm ------------------------------------------------------------------------


def submit(user: str, *opts: str, wrap: str = "sleep 1") -> str:
    out = ctld("sbatch", "--parsable", "-J", NAME, *opts, "--wrap", wrap, user=user)
    return out.strip().split(";")[0]


def wait_gone(job_ids: list[str], timeout_s: float) -> None:
    """Until none of ``job_ids`` is in the queue (ended)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not ctld("squeue", "-h", "-j", ",".join(job_ids), "-o", "%i", check=False).split():
            return
        time.sleep(0.5)
    raise AssertionError(f"jobs {job_ids} still queued after {timeout_s:g} s")


def wait_state(job_id: str, state: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ctld("squeue", "-h", "-j", job_id, "-o", "%T", check=False).strip() == state:
            return
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} not {state} within {timeout_s:g} s")


def assoc_tree() -> Assoc:
    """The cluster's association tree with shares (``sacctmgr show assoc``)."""
    out = ctld("sacctmgr", "-n", "-P", "show", "assoc", "format=account,user,parentname,fairshare")
    accounts: dict[str, list[tuple[str, bool, int]]] = {}
    parent_of: dict[str, str] = {}
    shares_of: dict[str, int] = {}
    for line in out.splitlines():
        if not line.strip():
            continue
        account, user, parent, share = (f.strip() for f in line.split("|")[:4])
        if share == "parent":
            raise AssertionError(f"{account}/{user}: Fairshare=parent is not modelled")
        if user:
            accounts.setdefault(account, []).append((user_key(account, user), True, int(share)))
        else:
            parent_of[account] = parent
            shares_of[account] = int(share or 1)
            accounts.setdefault(account, [])
            if parent:
                accounts.setdefault(parent, []).append((account, False, int(share or 1)))

    def build(name: str, shares: int) -> Assoc:
        children = tuple(
            Assoc(k, shares=s, user=True) if is_user else build(k, s)
            for k, is_user, s in accounts[name]
        )
        return Assoc(name, shares=shares, children=children)

    (root,) = [a for a, p in parent_of.items() if not p]
    return build(root, shares_of[root])


@dataclass(frozen=True)
class Shares:
    raw_usage: dict[str, float]
    fairshare: dict[str, float]


def sshare() -> Shares:
    out = ctld("sshare", "-a", "-P", "-n", "-o", "Account,User,RawUsage,FairShare")
    usage: dict[str, float] = {}
    fs: dict[str, float] = {}
    for line in out.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) < 4 or not fields[1]:
            continue
        key = user_key(fields[0], fields[1])
        usage[key] = float(fields[2] or 0)
        if fields[3]:
            fs[key] = float(fields[3])
    return Shares(usage, fs)


SPRIO = ("job", "partition", "user", "priority", "site", "age", "fairshare", "jobsize",
         "partfactor", "qos", "nice")  # fmt: skip


def sprio(job_ids: list[str]) -> dict[str, dict[str, str]]:
    fmt = "%i|%r|%u|%Y|%S|%A|%F|%J|%P|%Q|%N"  # sprio -l's factors, parseable
    # Every pending job, then ours: 24.11 refuses a --jobs list that names a job it has
    # no priority for yet ("Invalid job id"), where 22.05 leaves it out.
    out = ctld("sprio", "-h", "-o", fmt)
    rows = [dict(zip(SPRIO, (f.strip() for f in line.split("|")), strict=True))
            for line in out.splitlines() if line.strip()]  # fmt: skip
    wanted = set(job_ids)
    return {r["job"]: r for r in rows if r["job"] in wanted}


def cluster_size() -> ClusterSize:
    out = ctld("scontrol", "-o", "show", "node")
    cpus = [int(m[1]) for m in re.finditer(r"\bCPUTot=(\d+)", out)]
    return ClusterSize(len(cpus), sum(cpus))


def partition_norms() -> dict[str, float]:
    out = ctld("scontrol", "-o", "show", "partition")
    factors = {
        m[1]: int(f[1])
        for line in out.splitlines()
        if (m := re.match(r"PartitionName=(\S+)", line))
        and (f := re.search(r"\bPriorityJobFactor=(\d+)", line))
    }
    top = max(factors.values())
    return {p: v / top for p, v in factors.items()}


def partition_tiers() -> dict[str, int]:
    out = ctld("scontrol", "-o", "show", "partition")
    return {
        m[1]: int(t[1])
        for line in out.splitlines()
        if (m := re.match(r"PartitionName=(\S+)", line))
        and (t := re.search(r"\bPriorityTier=(\d+)", line))
    }


def qos_norms() -> dict[str, float]:
    out = ctld("sacctmgr", "-n", "-P", "show", "qos", "format=name,priority")
    prio = {n: int(p or 0) for n, p in (line.split("|")[:2] for line in out.splitlines() if line)}
    top = max(prio.values())
    return {n: (p / top if top else 0.0) for n, p in prio.items()}


def epoch(when: str = "now") -> float:
    """A time as slurmctld's container reads it, in seconds since the epoch (scontrol
    prints local times, in the container's time zone, not necessarily this host's)."""
    return float(ctld("date", "-d", when, "+%s").strip())


def accrued_at(job_id: str) -> float | None:
    """The job's AccrueTime (None: not accruing yet)."""
    text = ctld("scontrol", "-o", "show", "job", job_id)
    m = re.search(r"\bAccrueTime=(\S+)", text)
    if m is None or m[1] in ("Unknown", "None", "(null)"):
        return None
    return epoch(m[1])


def start_order(job_ids: list[str]) -> list[str]:
    out = ctld("sacct", "-n", "-X", "-P", "-j", ",".join(job_ids), "-o", "JobID,Start")
    starts = [tuple(line.split("|")[:2]) for line in out.splitlines() if line.strip()]
    return [j for j, _ in sorted(starts, key=lambda s: (s[1], int(s[0])))]


# -- the scenario -------------------------------------------------------------------------


@dataclass(frozen=True)
class Submitted:
    job_id: str
    user: str
    account: str
    partition: str
    qos: str
    cpus: int
    nice: int


def sequence(rng: random.Random) -> list[dict[str, object]]:
    """The seeded arrivals: who, where, how big, how nice."""
    return [
        {
            "user": rng.choices(("alice", "bob", "carol"), weights=(3, 2, 1))[0],
            "partition": rng.choices(("batch", "high"), weights=(3, 1))[0],
            "qos": rng.choice(("normal", "prod")),
            "cpus": rng.choice((1, 2, 4, 8, 16, 32)),
            "nice": rng.choice((0, 0, 10, 250)),
        }
        for _ in range(JOBS)
    ]


def concordance(predicted: list[str], actual: list[str]) -> float:
    """Share of job pairs the two orders put the same way round."""
    at = {j: i for i, j in enumerate(actual)}
    pairs = list(combinations(predicted, 2))
    agree = sum(at[a] < at[b] for a, b in pairs)
    return agree / len(pairs) if pairs else 1.0


def test_simulator_priorities_match_sprio_and_the_start_order(tmp_path: Path) -> None:
    require(has_accounting(), "the compose Slurm cluster with slurmdbd")
    cluster = Cluster()
    with exclusive_cluster(), priority_config_after_usage(cluster, tmp_path):
        blocker = submit(
            "root", "-p", "high", "-w", NODE, "--gres=gpu:8", "-c", "1", "-t", "10",
            wrap="sleep 600",
        )  # fmt: skip
        wait_state(blocker, "RUNNING")
        jobs: list[Submitted] = []
        for s in sequence(random.Random(SEED)):
            jid = submit(
                str(s["user"]),
                "-p", str(s["partition"]), "-w", NODE, "--gres=gpu:8", "-t", "1",
                "-c", str(s["cpus"]), "--qos", str(s["qos"]), f"--nice={s['nice']}",
            )  # fmt: skip
            account = ctld("squeue", "-h", "-j", jid, "-o", "%a").strip()
            jobs.append(
                Submitted(
                    jid,
                    str(s["user"]),
                    account,
                    str(s["partition"]),
                    str(s["qos"]),
                    int(s["cpus"]),
                    int(s["nice"]),
                )
            )
        ids = [j.job_id for j in jobs]

        # Slurm's factors and the model's inputs, read as one consistent picture: the
        # decay thread may run in between (every minute), so read again until sshare is
        # the same before and after sprio
        for _ in range(30):  # (each job shows in sprio once slurmctld has priced it)
            shares = sshare()
            seen = sprio(ids)
            now = epoch()
            if sshare() == shares and len(seen) == len(ids):
                break
            time.sleep(1)
        tree, size = assoc_tree(), cluster_size()
        parts, qos = partition_norms(), qos_norms()
        model_fs = fair_tree(tree, shares.raw_usage).factors
        fs_differs = {
            k: (v, model_fs.get(k)) for k, v in shares.fairshare.items()
            if abs(v - model_fs.get(k, -1.0)) > 1e-5
        }  # fmt: skip

        matched, report = 0, []
        model_prio: dict[str, int] = {}
        for j in jobs:
            accrue = accrued_at(j.job_id)
            f = job_factors(
                CFG,
                waited_s=0.0 if accrue is None else now - accrue,
                fairshare=model_fs[user_key(j.account, j.user)],
                nodes=1,
                cpus=j.cpus,
                cluster=size,
                partition_norm=parts[j.partition],
                qos_norm=qos[j.qos],
                nice=j.nice,
            )
            mine = f.printed()
            model_prio[j.job_id] = f.priority
            slurm = seen.get(j.job_id)
            if slurm is None:  # not shown by sprio (held, or not eligible): a mismatch
                report.append(f"{j.job_id} {j.user:5} x not in sprio; model {mine}")
                continue
            theirs = {
                "age": int(slurm["age"]),
                "fairshare": int(slurm["fairshare"]),
                "jobsize": int(slurm["jobsize"]),
                "partition": int(slurm["partfactor"]),
                "qos": int(slurm["qos"]),
                "site": int(slurm["site"]),
                "nice": int(slurm["nice"]),
            }
            same = all(mine[k] == v for k, v in theirs.items())
            same = same and abs(mine["priority"] - int(slurm["priority"])) <= 1
            matched += same
            report.append(
                f"{j.job_id} {j.user:5} {'=' if same else 'x'} slurm {slurm} model {mine}"
            )
        print("\n".join(report))
        print(f"fair-share: sshare vs model, differing: {fs_differs or 'none'}")

        # Slurm starts them: the order the model predicts against the order they started
        tiers = partition_tiers()
        predicted = sorted(
            jobs, key=lambda j: (-tiers[j.partition], -model_prio[j.job_id], int(j.job_id))
        )
        ctld("scancel", blocker)
        wait_gone(ids, timeout_s=JOBS * 10 + 60)
        actual = start_order(ids)
        agree = concordance([j.job_id for j in predicted], actual)
        print(f"start order: predicted {[j.job_id for j in predicted]}, started {actual}")
        print(f"sprio matched {matched}/{len(jobs)}; start order pairs agreeing {agree:.0%}")

    assert matched >= 0.95 * len(jobs), report
    assert agree >= 0.90, (predicted, actual)


@contextmanager
def priority_config_after_usage(cluster: Cluster, tmp: Path) -> Iterator[None]:
    """The test's slurm.conf (:func:`priority_config`), every association's usage reset,
    then usage of our own: alice heavy, bob less, carol none; until slurmctld's decay
    thread has ranked them by it. Other tests' jobs in the same lane leave usage behind
    (carol's, in one CI run, outweighed alice's): without the reset the order would be
    the lane's luck."""
    with priority_config(cluster, tmp):
        reset_usage()
        usage = [
            submit("alice", "-p", "batch", "-w", "node02", "-c", "32", "-t", "2", wrap="sleep 5"),
            submit("bob", "-p", "batch", "-w", "node03", "-c", "16", "-t", "2", wrap="sleep 5"),
        ]
        try:
            wait_gone(usage, timeout_s=90)
        finally:
            ctld("scancel", *usage, check=False)
        # Fair-share factors are computed by the decay thread's passes (every minute),
        # which also run at start: a restart makes one now. Without it sprio gave the
        # factors of the pass before the reset (CI of 4d50d2f, 24.11: 2 of 16 matched).
        cluster.restart()
        wait_ranked_by_usage()
        yield


def reset_usage(timeout_s: float = 60) -> None:
    """Every association's raw usage to 0: resetting the root account resets its children
    (assoc_mgr_remove_assoc_usage); slurmdbd passes it to slurmctld, so poll sshare."""
    ctld("sacctmgr", "-i", "modify", "account", "where", "name=root", "set", "RawUsage=0")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(sshare().raw_usage.values()):
            return
        time.sleep(1)
    raise AssertionError(f"raw usage not reset within {timeout_s:g} s: {sshare().raw_usage}")


def wait_ranked_by_usage(timeout_s: float = 150) -> None:
    """Until sshare shows alice's usage above bob's and their fair-share in the reverse
    order, below carol's: the decay thread (every PriorityCalcPeriod, a minute) ranks
    the associations after the usage is charged."""
    alice, bob, carol = (user_key("research", u) for u in ("alice", "bob", "carol"))
    deadline = time.monotonic() + timeout_s
    shares = sshare()
    while time.monotonic() < deadline:
        shares = sshare()
        used, fs = shares.raw_usage, shares.fairshare
        heavier = used.get(alice, 0) > used.get(bob, 0) > 0
        # and the factors are those of this usage: every research association without
        # usage ranks with carol (a pass before the reset ranked research/root last)
        idle = [fs.get(k) for k, u in used.items() if not u and k.startswith("research/")]
        tied = all(f == fs.get(carol) for f in idle)
        if heavier and tied and fs.get(alice, 1) < fs.get(bob, 1) < fs.get(carol, 0):
            return
        time.sleep(2)
    raise AssertionError(f"usage step not ranked within {timeout_s:g} s: {shares}")
