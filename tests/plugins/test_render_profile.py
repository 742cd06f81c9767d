"""``plugins render --profile``: the queue order a profile names is the one rendered, and
the one the simulator measured with the same profile (issue #43)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_run import assert_one_line_error, run_main
from slurm_defrag.sim.configuration import from_profile
from slurm_defrag.sim.levers import short_first_of
from slurm_defrag.sim.profile import load_profile

from .plugins_support import ROOT
from .test_render import COMPOSE, compose_conf

ONE = ROOT / "examples" / "profiles" / "one-configuration.toml"
BOUND = ("cap", "cap_share", "range", "weights")
"""The cap's keys: from the site's priority weights, which the simulator takes apart."""


def _render(tmp: Path, capsys: pytest.CaptureFixture[str], *opts: str) -> str:
    conf = compose_conf(tmp, feature_on="node03")
    capsys.readouterr()
    code = run_main(
        "plugins", "render", "--slurm-conf", str(conf), "--gres-conf", str(COMPOSE / "gres.conf"),
        "--no-touch", *opts,
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_the_profile_renders_what_the_flags_render(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ("--short-first", "0.1", "--short-first-all", "--large-first", "4")
    by_flags = _render(tmp_path, capsys, *flags, "--keep-scarce", "0.5")
    by_profile = _render(tmp_path, capsys, "--profile", str(ONE))
    assert by_profile == by_flags
    assert "short_first" in by_profile


def test_the_rendered_order_is_the_simulated_one(tmp_path: Path) -> None:
    from slurm_defrag.commands.plugins import RenderOptions, build_table
    from slurm_defrag.commands.render_profile import QueueOptions, queue_options
    from slurm_defrag.slurm.discovery.gres_conf import parse_gres_conf_links
    from slurm_defrag.slurm.discovery.slurm_conf import parse_slurm_conf

    q = queue_options(QueueOptions(), ONE)
    conf = parse_slurm_conf(compose_conf(tmp_path, feature_on="node03"))
    topo = parse_gres_conf_links((COMPOSE / "gres.conf").read_text(encoding="utf-8"))
    options = RenderOptions(
        short_first=q.short_first,
        short_first_all=q.short_first_all,
        large_first=q.large_first,
        keep_scarce=q.keep_scarce,
        boost_cap=q.boost_cap,
    )
    table, _ = build_table(conf, topo, options)
    rendered = {k: v for k, v in table["short_first"].items() if k not in BOUND}  # type: ignore[attr-defined]
    mode = from_profile(load_profile(ONE)).placement.mode
    assert mode is not None
    assert rendered == short_first_of(mode)


def test_a_profile_and_queue_flags_together_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = str(compose_conf(tmp_path))
    assert_one_line_error(
        capsys, "plugins", "render", "--slurm-conf", conf, "--profile", str(ONE),
        "--short-first", "0.2", words=("--profile", "--short-first"),
    )  # fmt: skip


def test_a_bad_profile_is_one_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("version = 1\n[job_submit]\nshort_first = 2\n")
    assert_one_line_error(
        capsys, "plugins", "render", "--slurm-conf", str(compose_conf(tmp_path)),
        "--profile", str(bad), words=(str(bad), "job_submit.short_first"),
    )  # fmt: skip
