from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slurm_defrag.cli import app
from slurm_defrag.errors import InputError
from slurm_defrag.traces import openb
from slurm_defrag.traces.overlay import apply_overlay, require_nvlink

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"openb-node-{i:04d},{cpu},262144,{g},{m}\n"
    for i, (cpu, g, m) in enumerate(
        [(96000, 8, "G2")] * 3 + [(64000, 2, "P100")] * 2 + [(32000, 4, "T4")]
    )
)
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    + "".join(
        f"openb-pod-{i:04d},{4000 + 1000 * (i % 3)},8192,{n},{m},{spec},LS,Running,"
        f"{i * 10},{i * 10 + 500},{i * 10}\n"
        for i, (n, m, spec) in enumerate(
            [(1, 1000, ""), (1, 460, ""), (0, 0, ""), (2, 1000, ""), (1, 1200, "T4|G2")] * 8
        )
    )
)


@pytest.fixture
def traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / openb.FOLDER
    d.mkdir()
    (d / "openb_node_list_gpu_node.csv").write_text(NODES)
    (d / "openb_pod_list_default.csv").write_text(PODS)
    (d / "openb_pod_list_multigpu50.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,1000,10,8,1000\n"
    )
    monkeypatch.setenv("SLURM_DEFRAG_TRACES", str(tmp_path))
    return tmp_path


def test_loaders_convert_like_the_artifact(traces: Path) -> None:
    nodes = openb.load_nodes()
    assert len(nodes) == 6
    assert nodes[0].gpus == 8
    assert nodes[0].model == "G2"
    pods = openb.load_pods()
    assert pods[4].gpu_milli == 1000  # 1200 clamped
    assert pods[4].gpu_models == frozenset({"T4", "G2"})
    assert pods[2].num_gpu == 0
    assert pods[2].gpu_models is None
    assert pods[1].duration == 500.0
    assert openb.load_pods("multigpu50")[0].duration == 0.0
    assert openb.pod_variants() == ["default", "multigpu50"]


def test_unknown_variant_names_the_known_ones(traces: Path) -> None:
    with pytest.raises(InputError, match="multigpu50"):
        openb.load_pods("nope")


def test_overlay_and_nvlink_jobs(traces: Path) -> None:
    nodes = apply_overlay(openb.load_nodes(), "nvlink")
    assert [n.topology for n in nodes] == ["nvswitch-8"] * 3 + ["nvlink-pairs-2"] * 2 + [
        "nvlink-pairs-4"
    ]
    assert [j.nvlink for j in require_nvlink(openb.load_pods())[:4]] == [False, False, False, True]


def test_simulate_command_writes_json_and_plots(traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    for proto, extra in (
        ("a", []),
        (
            "b",
            [
                "--loads",
                "1.2",
                "--scale",
                "1",
                "--horizon-h",
                "0.5",
                "--warmup-h",
                "0.1",
                "--max-runtime-h",
                "0.2",
            ],
        ),
    ):
        res = CliRunner().invoke(
            app,
            [
                "simulate",
                "-p",
                proto,
                "--seeds",
                "2",
                "--policies",
                "fgd,packing",
                "--out",
                str(out),
                *extra,
            ],
        )
        assert res.exit_code == 0, res.output
        assert (out / f"protocol_{proto}.json").is_file()
        assert (out / f"protocol_{proto}.png").stat().st_size > 1000
    res = CliRunner().invoke(app, ["simulate", "--defrag", "bogus", "--seeds", "1"])
    assert res.exit_code != 0


def test_simulate_protocol_a_with_the_planner_prints_the_defrag_table(traces: Path) -> None:
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "-p",
            "a",
            "--seeds",
            "1",
            "--policies",
            "packing",
            "--defrag",
            "none,planner",
            "--requeue-cap",
            "total",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "Protocol A with defrag" in " ".join(res.output.split())
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "-p",
            "a",
            "--seeds",
            "1",
            "--policies",
            "packing",
            "--defrag",
            "planner",
            "--requeue-cap",
            "total",
            "--json",
        ],
    )
    (run,) = json.loads(res.output)["runs"]
    assert run["defrag"] == "planner (total cap)"
    assert run["requeue_cap"] == "total"
    assert run["requeues"] <= run["running_end"] // 100 + 1
    res = CliRunner().invoke(app, ["simulate", "--requeue-cap", "always", "--seeds", "1"])
    assert res.exit_code != 0
    assert "--requeue-cap" in str(res.exception)
    res = CliRunner().invoke(app, ["simulate", "-p", "b", "--backfill", "some", "--seeds", "1"])
    assert isinstance(res.exception, InputError)
    assert "--backfill 'some'" in str(res.exception)


def test_no_trace_folder_says_where_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The package never guesses a machine path: no option and no env var is one line
    naming both and where the openb trace comes from (issue #17)."""
    monkeypatch.delenv("SLURM_DEFRAG_TRACES", raising=False)
    res = CliRunner().invoke(app, ["simulate", "--seeds", "1"])
    assert isinstance(res.exception, InputError)
    assert "--traces DIR" in str(res.exception)
    assert "alibaba/clusterdata" in str(res.exception)


def test_traces_option_wins_and_must_exist(
    traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_DEFRAG_TRACES", str(tmp_path / "nowhere"))
    res = CliRunner().invoke(app, ["simulate", "--traces", str(tmp_path / "missing")])
    assert isinstance(res.exception, InputError)
    assert "--traces" in str(res.exception)
    res = CliRunner().invoke(
        app,
        ["simulate", "--traces", str(traces), "--seeds", "1", "--policies", "first-fit", "--json"],
    )
    assert res.exit_code == 0, res.output
