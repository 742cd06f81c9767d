"""``slurm-defrag report impact`` as a terminal report: before and after, with intervals."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from slurm_defrag.report.safe_text import cells, markup, text
from slurm_defrag.store.impact import Impact, ImpactPoint, Period, verdict

_SPARK = "▁▂▃▄▅▆▇█"


_STYLE = {"better": "green", "worse": "red"}


def _num(value: float | None, unit: str = "", signed: bool = False) -> str:
    if value is None:
        return "–"
    digits = 2 if abs(value) < 10 else 1 if abs(value) < 1000 else 0
    text = f"{value:+,.{digits}f}" if signed else f"{value:,.{digits}f}"
    return f"{text} h" if unit == "h" else text


def _spark(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    top = max(known, default=0.0)
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        elif top <= 0:
            out.append(_SPARK[0])
        else:
            out.append(_SPARK[min(len(_SPARK) - 1, int(v / top * (len(_SPARK) - 1) + 0.5))])
    return "".join(out)


def _period_line(p: Period) -> str:
    return (
        f"{p.start:%Y-%m-%d %H:%M} → {p.end:%Y-%m-%d %H:%M} "
        f"({p.hours:,.1f} h, {p.snapshots:,} snapshots)"
    )


def render(console: Console, r: Impact) -> None:
    console.print(
        f"[bold]cluster {markup(r.cluster)}[/]  {r.since:%Y-%m-%d %H:%M} → "
        f"{r.until:%Y-%m-%d %H:%M} UTC, change at [bold]{r.change_at:%Y-%m-%d %H:%M} UTC[/] "
        f"({markup(r.change)})"
    )
    console.print(f"  before  {_period_line(r.before)}")
    console.print(f"  after   {_period_line(r.after)}")
    table = Table(box=None, title="Before and after (means; change = after − before)",
                  title_justify="left")  # fmt: skip
    for col in ("", "before", "after", "change", "95 % interval", ""):
        table.add_column(col, justify="left" if col == "" else "right", no_wrap=True)
    for c in r.comparisons:
        v = verdict(c)
        interval = "–" if c.low is None or c.high is None else (
            f"{_num(c.low, signed=True)} … {_num(c.high, signed=True)}"
        )  # fmt: skip
        table.add_row(
            *cells(c.label, _num(c.before, c.unit), _num(c.after, c.unit),
                   _num(c.difference, c.unit, signed=True), interval),
            text(v, _STYLE.get(v, "")),
        )  # fmt: skip
    console.print()
    console.print(table)
    console.print(f"  units: h hours; GPU-h/d GPU-hours per day; /d per day; "
                  f"large = {r.large_gpus}+ GPUs")  # fmt: skip
    console.print()
    for p in (r.before, r.after):
        console.print(f"[bold]{p.name}[/]: " + _jobs_line(p))
        console.print("        " + _plans_line(p))
    console.print(
        f"  waits from {markup(r.waits_from)}; {r.straddling:,} job(s) submitted before the "
        "change and started after it are in neither period"
    )
    _time_view(console, r)
    console.print(
        f"\nIntervals: block bootstrap, {r.blocks[0]} + {r.blocks[1]} blocks of "
        f"{_duration(r.block_s)}, {r.resamples:,} resamples, seed {r.seed} "
        "(docs/reports.md, how the intervals are computed)"
    )
    for note in r.notes:
        console.print(f"note: {markup(note)}")


def _duration(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:g} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 60:.3g} min"


def _jobs_line(p: Period) -> str:
    if not p.jobs:
        return "no GPU job submitted and started"
    wait = (
        f"{p.jobs:,} GPU jobs submitted and started, wait median {p.wait_median_h:.2f} h, "
        f"p90 {p.wait_p90_h:.2f} h"
    )
    if p.large_jobs:
        wait += f"; {p.large_jobs:,} large, median {p.large_wait_median_h:.2f} h"
    starved = (
        "" if p.falsely_starved_gpu_hours is None
        else f"; {p.falsely_starved_gpu_hours:,.0f} falsely starved GPU-hours"
    )  # fmt: skip
    return wait + starved


def _plans_line(p: Period) -> str:
    plans = ", ".join(f"{n} {s}" for s, n in p.plans.items()) or "none"
    modes = ", ".join(f"{m} {n}" for m, n in p.plan_modes.items())
    line = f"plans: {plans}" + (f" ({modes})" if modes else "")
    line += f"; requeues {p.requeues:,} ({p.gpu_hours_lost:,.1f} GPU-h lost)"
    if p.dry_run_requeues:
        line += f"; dry-run plans would have requeued {p.dry_run_requeues:,}"
    return line


def _groups(r: Impact, width: int) -> tuple[list[list[ImpactPoint]], int]:
    """The series in at most ``width`` consecutive groups, none across the change; and
    the index of the first group after it."""
    before = [p for p in r.series if p.t < r.change_at]
    after = [p for p in r.series if p.t >= r.change_at]
    size = max(1, math.ceil(len(r.series) / max(1, width)))
    cut = [before[i : i + size] for i in range(0, len(before), size)]
    return cut + [after[i : i + size] for i in range(0, len(after), size)], len(cut)


def _mean(group: list[ImpactPoint], field: str) -> float | None:
    known = [(getattr(p, field), p.samples) for p in group if getattr(p, field) is not None]
    weight = sum(n for _, n in known)
    return sum(v * n for v, n in known) / weight if weight else None


def _time_view(console: Console, r: Impact) -> None:
    if not r.series:
        return
    groups, cut = _groups(r, max(10, console.width - 30))
    span = (r.until - r.since).total_seconds() / max(1, len(groups))
    console.print(f"\n[bold]Time view[/] ({len(groups)} columns of ~{_duration(span)}, "
                  "│ = the change)")  # fmt: skip
    for label, field in (("unusable GPUs", "unusable"), ("  spatial", "unusable_spatial"),
                         ("  topology", "unusable_topology"),
                         ("  configuration", "unusable_configuration"), ("FGD", "fgd"),
                         ("falsely starved GPUs", "falsely_starved_gpus")):  # fmt: skip
        spark = _spark([_mean(g, field) for g in groups])
        console.print(f"  {label:<22} {spark[:cut]}[bold]│[/]{spark[cut:]}")
