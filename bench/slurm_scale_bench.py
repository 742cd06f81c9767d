"""Benchmark: read path and full service cycle against a real slurmctld with 128 nodes.

    python bench/slurm_scale_bench.py up       # the scale cluster + its running jobs
    python bench/slurm_scale_bench.py measure  # cli and rest, inside the service container
    python bench/slurm_scale_bench.py down

The compose cluster of scripts/cluster.sh (Debian trixie, Slurm 24.11), with its four node
containers each hosting NODES/4 slurmd (``slurmd -N snNNN``, one Port= per node, spool and
pid per node with %n) instead of one: 128 nodes x 8 fake GPUs by default (a100 NVSwitch,
a100-80g NVSwitch, h100 bridged pairs, as the 4-node cluster), generated into
.cluster/scale/ and mounted over /etc/slurm by a compose override. ``up`` fills every GPU
with 1/2/4-GPU sleep jobs of alice, bob and carol (some in QOS prod, protected), cancels a
random share so the free GPUs are scattered, then queues 8- and 4-GPU NVLink jobs that the
scattered GPUs cannot hold: fragmentation-blocked targets for the planner.

``measure`` runs in the slurm-defrag service image beside slurmctld (its network namespace,
as the service is deployed: cli commands without ``docker exec``), with this tree's code
mounted, and times per backend: three snapshot reads, then the real ``Cycle`` in dry-run on
SQLite (first cycle, then steady ones), with the same collector tuning as ``serve``.
Environment as scripts/cluster.sh (defaults here: SLURM_SUITE=trixie,
CLUSTER_PREFIX=slurmdefrag-scale, SLURMRESTD_PORT=6890, POSTGRES_PORT=55510: outside the
ports scripts/test.sh gives its lanes, 6830+ and 55452+, so the bench can run beside the
test command; with 6850 a CI lane once failed to start).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCKER = "/usr/bin/docker"
ENV = {
    "SLURM_SUITE": "trixie",
    "CLUSTER_PREFIX": "slurmdefrag-scale",
    "SLURMRESTD_PORT": "6890",
    "POSTGRES_PORT": "55510",
}
HOSTS = ("node01", "node02", "node03", "node04")
SCALE_DIR = ROOT / ".cluster" / "scale"
FIRST_PORT = 17001


# GPU model, per-GPU Links= rows (NVSwitch: all pairs; h100 here: bridged pairs only)
def _links(linked: Callable[[int, int], bool]) -> list[str]:
    return [
        ",".join("-1" if i == j else ("12" if linked(i, j) else "0") for j in range(8))
        for i in range(8)
    ]


_ALL = _links(lambda i, j: True)
_PAIRS = _links(lambda i, j: i // 2 == j // 2)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for key, value in ENV.items():
        env.setdefault(key, value)
    env["COMPOSE_OVERRIDE"] = str(SCALE_DIR / "compose.override.yml")
    return env


def _ctld(env: dict[str, str]) -> str:
    return f"{env['CLUSTER_PREFIX']}-{env['SLURM_SUITE']}-slurmctld"


def node_names(n: int) -> list[str]:
    return [f"sn{i:03d}" for i in range(1, n + 1)]


def _model(i: int, n: int) -> tuple[str, list[str]]:
    if i < n // 2:
        return "a100", _ALL
    if i < 3 * n // 4:
        return "a100-80g", _ALL
    return "h100", _PAIRS


def generate(n: int) -> None:
    """slurm.conf, gres.conf, topology.conf, the multi-slurmd launcher, the override."""
    assert n % len(HOSTS) == 0, "nodes must split evenly over the four node containers"
    SCALE_DIR.mkdir(parents=True, exist_ok=True)
    base = (ROOT / "docker" / "slurm" / "slurm.conf").read_text().splitlines()
    conf = [
        line
        for line in base
        if not (line.startswith("NodeName=") and not line.startswith("NodeName=DEFAULT"))
        and not line.startswith("SlurmdSpoolDir=")
    ]
    conf += ["SlurmdSpoolDir=/var/spool/slurmd/%n", "SlurmdPidFile=/run/slurmd-%n.pid"]
    names = node_names(n)
    per_host = n // len(HOSTS)
    gres = []
    for i, name in enumerate(names):
        host = HOSTS[i // per_host]
        model, links = _model(i, n)
        conf.append(
            f"NodeName={name} NodeHostname={host} NodeAddr={host} Port={FIRST_PORT + i} "
            f"Gres=gpu:{model}:8"
        )
        for g in range(8):
            cores = "0-15" if g < 4 else "16-31"
            gres.append(
                f"NodeName={name} Name=gpu Type={model} File=/dev/nvidia{g} Cores={cores} "
                f"Links={links[g]}"
            )
    (SCALE_DIR / "slurm.conf").write_text("\n".join(conf) + "\n")
    (SCALE_DIR / "gres.conf").write_text("\n".join(gres) + "\n")
    leaves = [names[k : k + 16] for k in range(0, n, 16)]
    topo = [f"SwitchName=leaf{k + 1} Nodes={','.join(group)}" for k, group in enumerate(leaves)]
    topo.append(f"SwitchName=spine Switches={','.join(f'leaf{k + 1}' for k in range(len(leaves)))}")
    (SCALE_DIR / "topology.conf").write_text("\n".join(topo) + "\n")
    launcher = SCALE_DIR / "slurmd-many.sh"
    launcher.write_text(
        "#!/bin/bash\n"
        "# Many slurmd in one container: munged once, then one slurmd -N per node name.\n"
        "set -eu\n"
        "mkdir -p /run/munge /var/lib/munge /var/log/munge\n"
        "chown munge:munge /run/munge /var/lib/munge /var/log/munge\n"
        "setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged\n"
        "for _ in $(seq 50); do [ -S /run/munge/munge.socket.2 ] && break; sleep 0.1; done\n"
        "for i in 0 1 2 3 4 5 6 7; do\n"
        "  [ -e /dev/nvidia$i ] || mknod -m 0666 /dev/nvidia$i c 195 $i; done\n"
        'for node in "$@"; do\n'
        '  mkdir -p "/var/spool/slurmd/$node"\n'
        '  /usr/sbin/slurmd -D -N "$node" & done\n'
        "wait -n\n"
        'echo "slurmd-many: a slurmd exited" >&2; exit 1\n'
    )
    launcher.chmod(0o755)
    mounts = [
        f"      - {SCALE_DIR / f}:/etc/slurm/{f}:ro"
        for f in ("slurm.conf", "gres.conf", "topology.conf")
    ]
    lines = ['version: "2.4"', "services:"]
    for svc in ("slurmctld", "slurmrestd", *HOSTS):
        lines += [f"  {svc}:", "    volumes:", *mounts]
        if svc in HOSTS:
            k = HOSTS.index(svc)
            lines.append(f"      - {launcher}:/usr/local/sbin/slurmd-many.sh:ro")
            mine = names[k * per_host : (k + 1) * per_host]
            lines.append(f"    command: {['/usr/local/sbin/slurmd-many.sh', *mine]!r}")
    (SCALE_DIR / "compose.override.yml").write_text("\n".join(lines).replace("'", '"') + "\n")


def _sh(env: dict[str, str], script: str, timeout: float = 900) -> str:
    proc = subprocess.run(
        [DOCKER, "exec", "-w", "/jobs", _ctld(env), "bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return proc.stdout


def _wait_nodes(env: dict[str, str], n: int, timeout: float = 600) -> None:
    t0 = time.monotonic()
    while True:
        out = _sh(env, "sinfo -h -N -o '%N %t' | sort -u")
        up = sum(1 for line in out.splitlines() if line.split()[1] in ("idle", "mix", "alloc"))
        if up >= n:
            print(f"{up} nodes up after {time.monotonic() - t0:.0f} s")
            return
        if time.monotonic() - t0 > timeout:
            sys.exit(f"only {up} of {n} nodes up after {timeout:.0f} s")
        time.sleep(5)


def fill(env: dict[str, str], n: int, seed: int) -> None:
    """Every GPU busy with 1/2/4-GPU jobs, then a random 12 % cancelled; then targets."""
    rng = random.Random(seed)
    sizes: list[int] = []
    free = n * 8
    while free > 0:
        k = min(free, rng.choice((1, 1, 1, 1, 1, 2, 2, 4)))
        sizes.append(k)
        free -= k
    users = ("alice", "bob", "carol")
    cmds = []
    for i, k in enumerate(sizes):
        user = users[i % 3]
        qos = " --qos=prod --account=prod" if user != "alice" and i % 10 == 0 else ""
        cmds.append(
            f"runuser -u {user} -- sbatch -Q -J fill{i} -N1 --gres=gpu:{k} -c1 --mem=100"
            f"{qos} -t 2-0 --wrap 'sleep 1d'"
        )
    t0 = time.monotonic()
    _sh(env, "\n".join(cmds), timeout=1800)
    print(f"{len(sizes)} fill jobs submitted in {time.monotonic() - t0:.0f} s")
    for _ in range(120):
        pending = _sh(env, "squeue -h -t PD -o %i | wc -l").strip()
        if pending == "0":
            break
        time.sleep(5)
    running = _sh(env, "squeue -h -t R -o %i").split()
    cancel = rng.sample(running, k=len(running) * 12 // 100)
    _sh(env, "scancel " + " ".join(cancel))
    targets = []
    for i in range(16):
        k = 8 if i % 4 else 4
        user = users[i % 3]
        targets.append(
            f"runuser -u {user} -- sbatch -Q -J target{i} -N1 --gres=gpu:{k} -c1 --mem=100"
            f" -t 1-0 --wrap 'sleep 60'"
        )
    _sh(env, "\n".join(targets))
    time.sleep(10)
    summary = _sh(env, "squeue -h -o '%T' | sort | uniq -c")
    print(f"cancelled {len(cancel)}; queue now:\n{summary}")


def up(args: argparse.Namespace) -> None:
    generate(args.nodes)
    env = _env()
    subprocess.run([str(ROOT / "scripts" / "cluster.sh"), "up"], env=env, check=True)
    _wait_nodes(env, args.nodes)
    fill(env, args.nodes, args.seed)


def down(_args: argparse.Namespace) -> None:
    subprocess.run([str(ROOT / "scripts" / "cluster.sh"), "down"], env=_env(), check=True)


def measure(args: argparse.Namespace) -> None:
    """Start the measurement in the service image, in slurmctld's network namespace."""
    env = _env()
    token = _sh(env, "scontrol token username=root lifespan=7200").strip()
    token = token.removeprefix("SLURM_JWT=")
    image = f"slurm-defrag/defrag:{env['SLURM_SUITE']}"
    argv = [DOCKER, "run", "--rm", "--network", f"container:{_ctld(env)}"]
    for f in ("slurm.conf", "gres.conf", "topology.conf"):
        argv += ["-v", f"{SCALE_DIR / f}:/etc/slurm/{f}:ro"]
    argv += [
        "-v", f"{ROOT / 'src'}:/work/src:ro", "-v", f"{ROOT / 'bench'}:/work/bench:ro",
        "-e", "PYTHONPATH=/work/src:/work/bench", "-e", f"SCALE_REST_TOKEN={token}",
        image, "/opt/slurm-defrag/bin/python", "/work/bench/slurm_scale_bench.py", "inside",
        "--steady", str(args.steady),
    ]  # fmt: skip
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    subprocess.run(argv, check=True)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def inside(args: argparse.Namespace) -> None:
    """In the service container: time reads and cycles for each backend."""
    import tempfile
    from datetime import UTC, datetime

    from pydantic import SecretStr

    from slurm_defrag.actuator.killswitch import KillSwitch
    from slurm_defrag.policy.file import default_policy
    from slurm_defrag.service.collector import tune_for_large_heap
    from slurm_defrag.service.loop import Cycle, CycleDeps, CycleRules
    from slurm_defrag.slurm.backends import open_backend
    from slurm_defrag.slurm.connection import SlurmSettings
    from slurm_defrag.store import migrate
    from slurm_defrag.store.database import Store
    from slurm_defrag.store.engine import make_engine
    from slurm_defrag.store.lease import Lease
    from slurm_defrag.store.repo import Repository

    tune_for_large_heap()  # as `slurm-defrag serve` does
    # The default policy, but jobs that just started may be requeued: the fill jobs are
    # minutes old, and a cycle that plans is the one worth timing.
    policy = default_policy()
    policy = policy.model_copy(
        update={"protections": policy.protections.model_copy(update={"min_runtime_minutes": 0.0})}
    )
    settings = {
        "cli": SlurmSettings(backend="cli", gres_conf=Path("/etc/slurm/gres.conf")),
        "rest": SlurmSettings(
            backend="rest",
            rest_url="http://slurmrestd:6820",
            rest_token=SecretStr(os.environ["SCALE_REST_TOKEN"]),
            gres_conf=Path("/etc/slurm/gres.conf"),
        ),
    }
    for name, s in settings.items():
        backend = open_backend(s)
        reads = []
        for _ in range(3):
            t0 = time.perf_counter()
            snap = backend.snapshot()
            reads.append(time.perf_counter() - t0)
        running = sum(1 for _ in snap.running_gpu_jobs())
        pending = sum(1 for _ in snap.pending_gpu_jobs())
        print(
            f"{name}: {len(snap.nodes)} nodes, {running} running GPU jobs, {pending} pending; "
            f"read {' '.join(f'{r:.2f}' for r in reads)} s"
        )
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'defrag.db'}"
            engine = make_engine(url)
            migrate.upgrade(engine)
            engine.dispose()
            store = Store.open(url)
            deps = CycleDeps(
                backend,
                backend,
                Repository(store),
                Lease(store, "bench:1", ttl_s=3600),
                KillSwitch(Path(tmp) / "STOP"),
            )
            cycle = Cycle(deps, CycleRules("dry-run", policy, 900.0))
            for i in range(1 + args.steady):
                t0 = time.perf_counter()
                report = cycle.run()
                kind = "first " if i == 0 else "steady"
                print(
                    f"{name}: {kind} cycle {i + 1}: {time.perf_counter() - t0:.2f} s; "
                    f"{report.outcome}: {report.detail[:80]}"
                )
            store.close()
        print(f"{name}: at {datetime.now(UTC):%H:%M:%S}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("action", choices=("up", "measure", "down", "inside", "generate"))
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steady", type=int, default=3, help="unchanged cycles after the first")
    args = ap.parse_args()
    if args.action == "generate":
        generate(args.nodes)
    else:
        {"up": up, "measure": measure, "down": down, "inside": inside}[args.action](args)


if __name__ == "__main__":
    main()
