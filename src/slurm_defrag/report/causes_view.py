"""``slurm-defrag report causes`` as a terminal report: what strands the GPUs, by dimension."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from slurm_defrag.report.safe_text import cells, markup
from slurm_defrag.store.causes import Causes, Contributor


def _table(title: str, rows: list[Contributor], first: str) -> Table:
    t = Table(title=title, title_justify="left", box=None)
    t.add_column(first)
    for col in ("share", "GPU-h", "spatial", "topology", "config."):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(
            *cells(r.name), f"{r.share * 100:.0f} %", f"{r.gpu_hours:,.0f}",
            f"{r.spatial:,.0f}", f"{r.topology:,.0f}", f"{r.configuration:,.0f}",
        )  # fmt: skip
    return t


def render(console: Console, c: Causes) -> None:
    causes = " · ".join(f"{k} {v:,.0f}" for k, v in c.by_cause.items())
    console.print(
        f"[bold]cluster {markup(c.cluster)}[/]  {c.since:%Y-%m-%d %H:%M} → "
        f"{c.until:%Y-%m-%d %H:%M} UTC ({c.hours:,.0f} h): [bold]{c.stranded_gpu_hours:,.0f} "
        f"stranded GPU-hours[/] ({causes})"
    )
    console.print("  stranded: free GPUs no pending job could use (docs/metrics.md, unusable)")
    console.print(f"\n[bold]⇒ {markup(c.reading)}[/]\n")
    console.print(_table("What held the nodes: account × request × node type", c.headline,
                         "contributor"))  # fmt: skip
    for d in c.dimensions:
        console.print()
        console.print(f"[bold]{markup(d.title)}[/]")
        console.print(f"  ⇒ {markup(d.reading)}")
        console.print(_table("", d.rows, ""))
    console.print()
    console.print(_table("Who: accounts", c.accounts, "account"))
    console.print(_table("Who: users", c.users, "user"))
    if c.worst:
        t = Table(title="Worst hours", title_justify="left", box=None)
        for col in ("from (UTC)", "stranded GPUs", "most held by", "share"):
            t.add_column(col, justify="right" if col in ("stranded GPUs", "share") else "left")
        for w in c.worst:
            t.add_row(f"{w.start:%Y-%m-%d %H:%M}", f"{w.stranded_gpus:,.1f}", *cells(w.top),
                      f"{w.top_share * 100:.0f} %")  # fmt: skip
        console.print()
        console.print(t)
    for note in c.notes:
        console.print(f"note: {markup(note)}")
