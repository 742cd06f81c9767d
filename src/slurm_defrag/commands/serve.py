"""``slurm-defrag serve``: the long-running service (see docs/service.md)."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Service settings (TOML). Environment variables "
        "SLURM_DEFRAG_* override it; see docs/service.md for every key.",
        readable=False,
    ),
]
ProfileOpt = Annotated[
    Path | None,
    typer.Option(
        "--profile",
        help='A profile file (docs/simulator.md, "Profiles"): its lever is packing_lever '
        "(none: packing off) and its [defrag] policy the policy file; they override the "
        "config file and the environment.",
        readable=False,
    ),
]
MODES = ("off", "dry-run", "enforce")


def _complete_mode(incomplete: str) -> list[str]:
    return [m for m in MODES if m.startswith(incomplete)]


# A str checked in serve(), not a choice type: a wrong mode stays one line, exit 3.
ModeOpt = Annotated[
    str | None,
    typer.Option(
        "--mode",
        metavar="MODE",
        autocompletion=_complete_mode,
        help="off | dry-run | enforce (overrides the config file).",
    ),
]
OnceOpt = Annotated[
    bool,
    typer.Option(
        "--once",
        help="Run one cycle in the foreground and exit: 0 when it read Slurm, 4 when Slurm "
        "could not be read, 1 when the cycle failed.",
    ),
]


def serve(
    ctx: typer.Context,
    config: ConfigOpt = None,
    mode: ModeOpt = None,
    once: OnceOpt = False,
    profile: ProfileOpt = None,
) -> None:
    """Run the defragmentation service: read, store, plan and (mode=enforce) act.

    Examples:

      slurm-defrag serve -c /etc/slurm-defrag/service.toml            # every interval_s
      slurm-defrag serve -c /etc/slurm-defrag/service.toml --once     # one cycle, then exit
      slurm-defrag serve -c service.toml --mode dry-run --once        # plans, no action
      slurm-defrag --log-level debug serve -c service.toml            # more log on stderr
      slurm-defrag serve -c service.toml --profile one-configuration.toml  # its lever, policy
    """
    from slurm_defrag import wiring
    from slurm_defrag.commands.serve_profile import service_overrides
    from slurm_defrag.errors import DefragError, InputError
    from slurm_defrag.service import collector, logs, settings
    from slurm_defrag.service.http import ListenError
    from slurm_defrag.slurm.failures import SlurmUnavailableError

    if mode is not None and mode not in MODES:
        raise InputError(f"--mode must be off, dry-run or enforce, not {mode!r}")
    # slurm-defrag --log-level / -v (before the command) beats the config's log_level
    level = (ctx.find_root().obj or {}).get("log_level")
    s = settings.load(config, mode=mode, log_level=level, **service_overrides(profile))
    logs.setup(s.log_level, s.log_json)
    collector.tune_for_large_heap()
    service, store = wiring.build(s)
    log = logging.getLogger("slurm_defrag.service")
    if once:
        report = service.cycle.run()
        service.lease.release()
        store.close()
        # A quickstart's `serve --once` must fail on a host where Slurm cannot be read
        # (scontrol missing, slurmctld down), not print the outcome and exit 0.
        if report.outcome == "slurm-unavailable":
            raise SlurmUnavailableError(report.detail)
        if report.outcome == "error":
            raise DefragError(f"the cycle failed: {report.detail}")
        typer.echo(
            f"{report.outcome}: {report.detail}"
            + (f" plans={report.plans}" if report.plans else "")
        )
        return

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %s received", signal.Signals(signum).name)
        service.stopped.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        service.start()
    except ListenError as exc:  # name where the address came from (no options here)
        store.close()
        raise exc.named(settings.origins(s, ("http_host", "http_port"), config)) from None
    # The main thread only waits: cycles run in the scheduler's worker thread.
    service.stopped.wait()
    service.stopped.clear()
    service.stop()
    store.close()
