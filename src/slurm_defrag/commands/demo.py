"""``slurm-defrag demo``: the whole loop offline, on a simulated cluster (no Slurm, no
Docker): the service in enforce mode, its history in SQLite, its web page (docs/cli.md)."""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from types import FrameType
from typing import Annotated

import typer

from slurm_defrag.errors import InputError

DurationOpt = Annotated[
    str,
    typer.Option(
        "--duration",
        help="How long the demo runs (wall clock): 90s, 5m, 1h; a number is seconds. "
        "It covers duration x speed of simulated time.",
    ),
]
SpeedOpt = Annotated[
    float,
    typer.Option(
        "--speed", min=1.0, max=1e6, help="Simulated seconds per second (60: an hour a minute)."
    ),
]
ProfileOpt = Annotated[
    str,
    typer.Option(
        "--profile",
        help="large-jobs (examples/policy-large-jobs.toml with the shape-weights lever: "
        "jobs of 4+ GPUs helped) or default (the built-in policy, every starved GPU job).",
    ),
]
PortOpt = Annotated[
    int,
    typer.Option("--port", min=0, max=65535, help="Port of the web page; 0 picks a free one."),
]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, help="Seed of the simulated workload.")]
DbOpt = Annotated[
    Path | None,
    typer.Option(
        "--db",
        readable=False,  # opened by the store, which says what is wrong in one line
        help="SQLite file to keep the history in (created or upgraded; default: a "
        "temporary file, removed at the end).",
        show_default=False,
    ),
]

HOST = "127.0.0.1"
PLACEHOLDER_PORT = 8788
"""The settings' port when --port is 0: the page and /metrics need the endpoint on, but the
server itself is bound by this command, on the port the system picks."""


def demo(
    duration: DurationOpt = "5m",
    speed: SpeedOpt = 60.0,
    profile: ProfileOpt = "large-jobs",
    port: PortOpt = 8788,
    seed: SeedOpt = 0,
    db: DbOpt = None,
) -> None:
    """Run the whole loop offline: a simulated cluster, the service acting on it, the web page.

    A simulated Slurm cluster (the course's, grown to 8 nodes, jobs keep coming)
    runs in accelerated time in this process. The real service cycle reads it,
    stores every snapshot, plans with the profile and applies the plans on it
    (enforce). The page shows the map, the plans and the history; top --db
    works on the database printed at the start. At the end: the jobs helped,
    the requeues, the work lost, the fragmentation before and after.
    """
    started = time.monotonic()
    from slurm_defrag import wiring
    from slurm_defrag.demo import profiles, run, scenario
    from slurm_defrag.demo.backend import SimSlurm
    from slurm_defrag.service import logs
    from slurm_defrag.service.http import ControlServer
    from slurm_defrag.service.settings import ServiceSettings
    from slurm_defrag.store import migrate
    from slurm_defrag.store.engine import make_engine

    chosen = profiles.profile(profile)
    pace = run.Pace(speed=speed, span_s=_seconds(duration) * speed)
    # after the span, plans in flight finish (at most their TTL, 900 s, and 3 cycles)
    horizon = pace.span_s + 900 + 3 * pace.interval_s
    logs.setup("WARNING", False)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    with ExitStack() as stack:
        tmp = Path(stack.enter_context(TemporaryDirectory(prefix="slurm-defrag-demo-")))
        url = _sqlite_url(db or tmp / "demo.db")
        engine = make_engine(url)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        cluster = scenario.build(seed, horizon, run.epoch_for(datetime.now(UTC), horizon))
        policy = stack.enter_context(chosen.policy_path())
        settings = ServiceSettings(
            mode="enforce",
            interval_s=pace.interval_s,
            policy=policy,
            solver=None,
            db_url=url,
            kill_switch_file=tmp / "STOP",
            packing=chosen.packing_lever is not None,
            packing_lever=chosen.packing_lever or "idle-bump",
            route_file=None,
            holder_id=f"demo:{os.getpid()}",
            http_host=HOST,
            http_port=port or PLACEHOLDER_PORT,
            web=True,
            metrics=True,
        )
        service, store = wiring.build(settings, backend=SimSlurm(cluster), clock=cluster.clock)
        stack.callback(store.close)
        server = ControlServer(HOST, port, None, None, service.pages)
        stack.callback(server.close)
        server.start()
        gpus = sum(s.gpus for s in cluster.state.nodes)
        typer.echo(
            f"slurm-defrag demo: {cluster.state.size} simulated nodes ({gpus} GPUs), profile "
            f"{chosen.name}, seed {seed}: {run.hhmm(pace.span_s)} simulated (h:m) in "
            f"{pace.span_s / speed:g} s, one service cycle per simulated minute, mode enforce"
        )
        typer.echo(f"  web page  {server.url}")
        typer.echo(f"  history   {url}   (slurm-defrag top --db {url})")
        for signum in (signal.SIGTERM, signal.SIGINT):  # stop early: finish, then summarize
            stack.callback(signal.signal, signum, signal.signal(signum, on_signal))
        driver = run.Driver(
            service.cycle,
            cluster,
            pace,
            say=typer.echo,
            stop=stop,
            started=started,
            large_gpus=scenario.LARGE_GPUS,
        )
        outcome = driver.run()
        service.lease.release()
        alone = scenario.build(seed, horizon, cluster.epoch)
        base, alone = run.baseline(alone, pace, outcome.sim_s)
        wait = run.large_wait(alone, scenario.LARGE_GPUS)
        for line in run.summary(outcome, base, wait, scenario.LARGE_GPUS):
            typer.echo(line)
        if db is None:
            typer.echo("  the history was in a temporary file, now removed (--db FILE keeps it)")


def _seconds(text: str) -> float:
    from slurm_defrag.timespec import parse_duration

    t = text.strip()
    try:
        seconds = float(t) if t.replace(".", "", 1).isdecimal() else parse_duration(t)
    except InputError:
        seconds = 0.0
    if not seconds > 0:
        raise InputError(f"--duration: {text[:40]!r} is not a duration like 90s, 5m or 1h")
    return seconds


def _sqlite_url(path: Path) -> str:
    return f"sqlite:///{path.expanduser().resolve()}"
