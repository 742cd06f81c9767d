"""One frame of ``slurm-defrag top``: header, falsely starved jobs, plans in progress, GPU map.

Pure rendering: the caller reads the snapshot, computes its metrics and loads the plans;
:func:`render_frame` turns them into one rich renderable. The compact parts come first, so
on a small terminal the map (the tallest part) is what gets shortened: when fitted to a
height it shows only the most fragmented nodes that fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.plan import Plan
from slurm_defrag.metrics.report import FragReport, request_text
from slurm_defrag.report.gpu_map import fragmented_map
from slurm_defrag.report.safe_text import cells, clean, lines, text
from slurm_defrag.store.models import OPEN_PLAN_STATUSES
from slurm_defrag.store.plans import PlanRecord, StepRecord

_STATE_STYLE = {"done": "green", "running": "bold yellow", "failed": "bold red",
                "pending": "dim", "skipped": "dim", "applying": "bold yellow", "open": "yellow",
                "aborted": "red"}  # fmt: skip
_FITTED_STARVED_ROWS = 10
"""Falsely starved jobs listed when fitting a terminal; ``frag`` lists them all."""


@dataclass(frozen=True)
class StepView:
    seq: int
    action: str
    target: str
    state: str
    error: str = ""


@dataclass(frozen=True)
class PlanView:
    """A stored plan as ``top`` shows it, with states as of the frame's moment."""

    db_id: int
    name: str
    """The planner's plan id (reservation ``defrag-<name>``), or the record's kind."""
    mode: str
    status: str
    targets: tuple[str, ...]
    victims: tuple[str, ...]
    steps: tuple[StepView, ...]
    note: str = ""


@dataclass(frozen=True)
class TopFrame:
    snapshot: ClusterSnapshot
    report: FragReport
    source: str
    """Where the snapshot came from, e.g. ``live (cli)`` or ``file examples/course.json``."""
    refreshed_at: datetime
    plans: tuple[PlanView, ...] | None = None
    """None: no database given, so plans cannot be known (not: there are none)."""
    status: str | None = None
    """A problem with the latest refresh; the rest of the frame is the last good one."""


def plan_view(rec: PlanRecord, steps: Sequence[StepRecord], at: datetime | None = None) -> PlanView:
    """The view of a stored plan, replayed to moment ``at`` (None: as it is now).

    Replay uses the steps' timestamps: a step finished by ``at`` shows its final state, one
    started by then ``running``, any other ``pending`` (steps appended later, like a
    rollback's ``undo-*``, therefore show as pending too).
    """
    name = str(rec.inputs.get("kind", "-"))
    targets: tuple[str, ...] = ()
    victims: tuple[str, ...] = ()
    if "plan" in rec.inputs:
        try:
            plan = Plan.model_validate(rec.inputs["plan"])
        except ValidationError:
            name = "?"  # written by another version: show its steps, skip its details
        else:
            name = plan.plan_id
            targets = tuple(f"{t.job_id} ({t.request})" for t in plan.served) or tuple(
                t.job_id for t in plan.targets
            )
            victims = tuple(f"{v.job_id} ({v.user})" if v.user else v.job_id
                            for v in plan.victims)  # fmt: skip
    views = tuple(StepView(s.seq, s.action, s.target, _state_at(s, at), s.error) for s in steps)
    return PlanView(db_id=rec.id, name=name, mode=rec.mode, status=_status_at(rec, steps, at),
                    targets=targets, victims=victims, steps=views, note=rec.note)  # fmt: skip


def _state_at(step: StepRecord, at: datetime | None) -> str:
    if at is None or (step.finished_at is not None and step.finished_at <= at):
        return step.state
    if step.started_at is not None and step.started_at <= at:
        return "running"
    return "pending"


def _status_at(rec: PlanRecord, steps: Sequence[StepRecord], at: datetime | None) -> str:
    if at is None or (rec.closed_at is not None and rec.closed_at <= at):
        return rec.status
    started = any(s.started_at is not None and s.started_at <= at for s in steps)
    return "applying" if started else "open"


def render_frame(
    frame: TopFrame,
    *,
    console: Console | None = None,
    max_nodes: int | None = None,
    footer: str = "",
) -> RenderableType:
    """The whole frame. With ``console``, fitted to its height; without, every part in full.

    ``max_nodes`` caps the GPU map in both cases; ``footer`` is a last dim line (key help).
    """
    fit = console is not None
    parts: list[RenderableType] = [_header(frame)]
    if frame.status:
        parts.append(text(frame.status, style="bold red"))
    parts.append(_starved(frame, _FITTED_STARVED_ROWS if fit else None))
    parts.append(_plans(frame.plans))
    tail = [Text(footer, style="dim")] if footer else []
    if console is not None:
        used = _height(console, Group(*parts, fragmented_map(frame.snapshot, frame.report, 0),
                                      *tail))  # fmt: skip
        room = max(1, console.size.height - used)
        max_nodes = room if max_nodes is None else min(max_nodes, room)
    parts.append(fragmented_map(frame.snapshot, frame.report, max_nodes))
    return Group(*parts, *tail)


def _height(console: Console, renderable: RenderableType) -> int:
    options = console.options.update(height=None)
    return len(console.render_lines(renderable, options, pad=False))


def _header(frame: TopFrame) -> Text:
    snap, c = frame.snapshot, frame.report.cluster_metrics.counts
    u = c.unusable
    text = Text.assemble(
        (clean(snap.cluster), "bold"),
        f"  snapshot {snap.taken_at:%Y-%m-%d %H:%M:%S %Z}",
        f"  source {clean(frame.source)}",
        (f"  refreshed {frame.refreshed_at:%H:%M:%S %Z}", "dim"),
    )
    text.append("\n")
    text.append_text(Text.assemble(
        "free GPUs ", (f"{c.free}/{c.gpus}", "bold"),
        "   unusable ", (str(u.total), "bold"),
        f" (spatial {u.spatial}, topology {u.topology}, configuration {u.configuration})",
        "   FGD ", (f"{c.fgd:.1f}", "bold"),
        f"   falsely starved {len(frame.report.falsely_starved)} of "
        f"{len(frame.report.pending)} pending GPU jobs",
    ))  # fmt: skip
    return text


def _starved(frame: TopFrame, limit: int | None) -> RenderableType:
    starved = frame.report.falsely_starved
    if not starved:
        return Text("no falsely starved job", style="green")
    users = {j.id: j.user for j in frame.snapshot.jobs}  # the report carries no user
    t = Table(title="Falsely starved jobs", title_justify="left", box=None, pad_edge=False)
    for col in ("job", "user", "GPUs asked", "verdict", "why"):
        t.add_column(col, overflow="fold", no_wrap=col != "why")
    for p in starved[:limit]:
        t.add_row(*cells(p.job_id, users.get(p.job_id, ""), request_text(p)),
                  text(p.reason or "", style="bold red"), text(p.message))  # fmt: skip
    if limit is not None and len(starved) > limit:
        t.caption = f"... and {len(starved) - limit} more (slurm-defrag frag lists them all)"
        t.caption_justify = "left"
    return t


def _plans(plans: tuple[PlanView, ...] | None) -> RenderableType:
    """Open plans under "Plans in progress"; a closed one (the latest, shown when none is
    open) under "Last plan", never as if it were in progress."""
    if plans is None:
        return Text("plans in progress: give --db URL to see them", style="dim")
    running = [p for p in plans if p.status in OPEN_PLAN_STATUSES]
    closed = [p for p in plans if p.status not in OPEN_PLAN_STATUSES]
    parts: list[RenderableType] = []
    if running:
        parts.append(_plan_table("Plans in progress", running))
    else:
        parts.append(Text("no plan in progress", style="dim"))
    if closed:
        parts.append(_plan_table("Last plan (closed)", closed))
    return Group(*parts)


def _step_state(mode: str, state: str) -> str:
    """A dry-run step never ran in Slurm: its ``done`` is shown as not executed."""
    if mode == "dry-run" and state == "done":
        return "not executed (dry-run)"
    return state


def _plan_table(title: str, plans: Sequence[PlanView]) -> Table:
    t = Table(title=title, title_justify="left", box=None, pad_edge=False)
    for col in ("plan", "status", "target", "victims", "steps"):
        t.add_column(col, overflow="fold")
    for p in plans:
        steps = Text()
        for i, s in enumerate(p.steps):
            if i:
                steps.append("\n")
            steps.append(f"{s.seq + 1}. {clean(s.action)} {clean(s.target)} ")
            steps.append(clean(_step_state(p.mode, s.state)),
                         style=_STATE_STYLE.get(s.state, ""))  # fmt: skip
            if s.error:
                steps.append(f" ({clean(s.error)})", style="red")
        status = text(p.status, style=_STATE_STYLE.get(p.status, ""))
        mode = "dry-run: nothing executed in Slurm" if p.mode == "dry-run" else p.mode
        status.append(f"\n{clean(mode)}", style="dim")
        if p.note:
            status.append(f"\n{clean(p.note)}", style="dim")
        t.add_row(text(f"#{p.db_id} {p.name}"), status,
                  lines(list(p.targets)) if p.targets else "-",
                  lines(list(p.victims)) if p.victims else "-", steps)  # fmt: skip
    return t
