"""``nvidia-smi topo -m`` / ``nvlink --status`` parsing and ``slurm-defrag topology collect``.

Fixtures in tests/fixtures/nvidia-smi/ are recorded outputs (provenance in its README).
The command tests run a fake ``nvidia-smi`` shell script from a tmp_path PATH that prints
a fixture, so the real subprocess path (argv list, timeout) is exercised.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from cli_run import assert_one_line_error, run_main
from slurm_defrag.slurm.discovery import nvidia_smi as smi
from slurm_defrag.slurm.discovery.nvidia_smi import (
    TopologyParseError,
    apply_link_status,
    parse_link_status,
    parse_topo_matrix,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"


def _full(n: int, v: int) -> list[list[int]]:
    return [[-1 if i == j else v for j in range(n)] for i in range(n)]


DGX1_V100 = [
    [-1, 1, 1, 2, 2, 0, 0, 0],
    [1, -1, 2, 1, 0, 2, 0, 0],
    [1, 2, -1, 2, 0, 0, 1, 0],
    [2, 1, 2, -1, 0, 0, 0, 1],
    [2, 0, 0, 0, -1, 1, 1, 2],
    [0, 2, 0, 0, 1, -1, 2, 1],
    [0, 0, 1, 0, 1, 2, -1, 2],
    [0, 0, 0, 1, 2, 1, 2, -1],
]

EXPECTED = {
    "dgx-a100.topo.txt": _full(8, 12),
    "hgx-h200.topo.txt": _full(8, 18),
    "dgx1-v100.topo.txt": DGX1_V100,
    "pcie-8x4090.topo.txt": _full(8, 0),
    "dgx1-pcie-mp.topo.txt": _full(8, 0),
    "a100-pcie-nvlink-pairs.topo.txt": [
        [-1, 12, 0, 0],
        [12, -1, 0, 0],
        [0, 0, -1, 12],
        [0, 0, 12, -1],
    ],
}


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_matrix(name: str) -> None:
    topo = parse_topo_matrix(_text(name), name)
    assert topo.links == EXPECTED[name]
    assert topo.gpus == len(EXPECTED[name])
    assert topo.warnings == []


def test_every_topo_fixture_has_an_expected_matrix() -> None:
    assert {p.name for p in FIXTURES.glob("*.topo.txt")} == set(EXPECTED)


def test_spaces_instead_of_tabs_ansi_header_and_a_pasted_prompt() -> None:
    text = _text("dgx-a100.topo.txt").replace("\t", "    ")
    lines = text.splitlines()
    lines[0] = "\x1b[4m" + lines[0] + "\x1b[0m"
    text = "$ nvidia-smi topo -m\n" + "\n".join(lines) + "\n"
    assert parse_topo_matrix(text).links == _full(8, 12)


def test_legacy_soc_means_no_nvlink() -> None:
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-7\nGPU1\tSOC\t X \t8-15\n"
    assert parse_topo_matrix(text).links == [[-1, 0], [0, -1]]


# --- nvlink --status ----------------------------------------------------------------------


def test_status_all_up_changes_nothing() -> None:
    topo = parse_topo_matrix(_text("dgx1-v100.topo.txt"))
    status = parse_link_status(_text("dgx1-v100.nvlink.txt"))
    assert {g: (len(s.up), len(s.down)) for g, s in status.items()} == dict.fromkeys(
        range(8), (6, 0)
    )
    out = apply_link_status(topo, status, "s")
    assert out.links == DGX1_V100
    assert out.warnings == []


def test_status_gpu_with_every_link_down_loses_its_nvlinks() -> None:
    topo = parse_topo_matrix(_text("dgx1-v100.topo.txt"))
    status = parse_link_status(_text("dgx1-v100-gpu3-down.nvlink.txt"))
    out = apply_link_status(topo, status, "s")
    expected = [row[:] for row in DGX1_V100]
    for j in range(8):
        if j != 3:
            expected[3][j] = expected[j][3] = 0
    assert out.links == expected
    assert out.warnings == [
        "GPU 3: NVLink 0, 1, 2, 3, 4, 5 inactive (0 up): NVLinks to GPU 0, 1, 2, 7 dropped"
    ]


def test_status_partly_down_caps_pairs_at_the_up_links() -> None:
    # 4 of 6 up on GPU 3: no pair of GPU 3 has more than 2 links, so nothing changes, and
    # the warning says the down links' peers are unknown (the DGX-1 limitation).
    topo = parse_topo_matrix(_text("dgx1-v100.topo.txt"))
    status = parse_link_status(_text("dgx1-v100-gpu3-partial.nvlink.txt"))
    assert sorted(status[3].down) == [3, 5]
    out = apply_link_status(topo, status, "s")
    assert out.links == DGX1_V100
    assert "GPU 3: NVLink 3, 5 inactive (4 up)" in out.warnings[0]
    # NVSwitch: 17 of 18 up on GPU 0 -> NV17 to every peer, still connected
    h200 = parse_topo_matrix(_text("hgx-h200.topo.txt"))
    lines = "GPU 0: NVIDIA H200 (UUID: GPU-x)\n" + "".join(
        f"\t Link {k}: {'<inactive>' if k == 7 else '26.562 GB/s'}\n" for k in range(18)
    )
    capped = apply_link_status(h200, parse_link_status(lines), "s")
    assert capped.links[0][1:] == [17] * 7
    assert capped.links[1][0] == 17
    assert capped.links[1][2] == 18


def test_status_nvml_all_links_inactive_message() -> None:
    status = parse_link_status(_text("rtx-a6000-all-inactive.nvlink.txt"))
    assert {g: len(s.up) for g, s in status.items()} == {0: 4, 1: 4, 2: 0}
    topo = parse_topo_matrix(_text("a100-pcie-nvlink-pairs.topo.txt"))
    out = apply_link_status(topo, status, "s")
    assert out.links[2][3] == out.links[3][2] == 0
    assert out.links[0][1] == 4  # that status has 4 links up per GPU: the pair is capped


def test_status_capital_inactive_is_down() -> None:
    status = parse_link_status("GPU 0: NVIDIA H100 NVL (UUID: x)\n\t Link 4: Inactive\n")
    assert status[0].down == frozenset({4})


# --- hostile / odd input: one error naming the line --------------------------------------

BAD_TOPO = [
    ("", "no header line starting with GPU0"),
    ("hello\nworld\n", "no header line"),
    ("\tGPU0\tGPU1\nGPU0\t X \n", "line 2: row GPU0 has 1 entries, expected at least 2"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\n", "row GPU1 missing (2 GPUs in header)"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \nGPU1\tNV4\t X \n", "line 4: second row"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\tPIX\nGPU1\tNV4\n", "line 3: row GPU1 has 1 entries"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nLegend:\n", "row GPU1 missing"),
    ("\tGPU0\tGPU1\nGPU1\tNV4\t X \nGPU0\t X \tNV4\n", "line 2: row GPU1 before row GPU0"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNVX\nGPU1\tNVX\t X \n", "line 2: GPU0 to GPU1 is 'NVX'"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV0\nGPU1\tNV0\t X \n", "NV0, out of range"),
    ("\tGPU0\tGPU1\nGPU0\tNV4\tNV4\nGPU1\tNV4\t X \n", "GPU0 to itself is 'NV4'"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tSYS\t X \n", "not symmetric: GPU0 to GPU1 is 4"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \nGPU2\tNV4\tNV4\n", "line 4: row GPU2"),
    ("\tGPU0\tGPU2\nGPU0\t X \tNV4\n", "line 1: column 'GPU2' after GPU0, expected GPU1"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\x07\nGPU1\tNV4\t X \n", "line 2: control character"),
    ("\t" + "\t".join(f"GPU{i}" for i in range(17)) + "\n", "17 GPUs, at most 16"),
    ("x" * (smi.MAX_OUTPUT_CHARS + 1), "characters, more than"),
]


@pytest.mark.parametrize(("text", "message"), BAD_TOPO)
def test_bad_topo_is_one_error_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(TopologyParseError) as info:
        parse_topo_matrix(text, "in.txt")
    assert message in str(info.value)
    assert str(info.value).startswith("in.txt")
    assert "\n" not in str(info.value)


BAD_STATUS = [
    ("\t Link 0: 25 GB/s\n", "line 1: 'Link 0: 25 GB/s' before the first GPU line"),
    ("GPU 0: A (UUID: x)\n\t Link 0: fast\n", "line 2: GPU 0 link 0 is 'fast'"),
    ("GPU 0: A (UUID: x)\n\t Lnk 0: 25 GB/s\n", "line 2: not a 'Link N: ...' line"),
    ("GPU 0: A (UUID: x)\n\t Link 0: 25 GB/s\n\t Link 0: 25 GB/s\n", "link 0 listed twice"),
    ("GPU 0: A\n\t Link 0: 25 GB/s\nGPU 0: A\n", "line 3: GPU 0 listed twice"),
]


@pytest.mark.parametrize(("text", "message"), BAD_STATUS)
def test_bad_status_is_one_error_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(TopologyParseError) as info:
        parse_link_status(text, "st.txt")
    assert message in str(info.value)
    assert str(info.value).startswith("st.txt line ")


def test_status_for_a_gpu_topo_does_not_have() -> None:
    topo = parse_topo_matrix(_text("a100-pcie-nvlink-pairs.topo.txt"))
    status = parse_link_status("GPU 7: A (UUID: x)\n\t Link 0: 25 GB/s\n")
    with pytest.raises(TopologyParseError, match="GPU 7 but topo -m shows 4 GPUs"):
        apply_link_status(topo, status, "st.txt")


# --- the command, end to end with a fake nvidia-smi ---------------------------------------


def _fake_nvidia_smi(tmp_path: Path, topo: str, status: str | None, code: int = 0) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "nvidia-smi"
    status_line = (
        f'cat "{FIXTURES / status}"' if status else "echo 'NVLink not supported' >&2; exit 3"
    )
    script.write_text(
        "#!/bin/sh\n"
        f"[ {code} -ne 0 ] && {{ echo 'NVIDIA-SMI has failed because it could not communicate"
        f" with the NVIDIA driver.'; exit {code}; }}\n"
        'case "$1 $2" in\n'
        f'  "topo -m") cat "{FIXTURES / topo}" ;;\n'
        f'  "nvlink --status") {status_line} ;;\n'
        '  *) echo "unexpected args: $*" >&2; exit 9 ;;\n'
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bindir


@pytest.fixture
def fake_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    def install(topo: str, status: str | None = None, code: int = 0) -> None:
        bindir = _fake_nvidia_smi(tmp_path, topo, status, code)
        monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")

    return install


def test_collect_end_to_end_writes_the_fixed_format(
    fake_path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_path("dgx1-v100.topo.txt", "dgx1-v100-gpu3-down.nvlink.txt")
    monkeypatch.setattr(smi.socket, "gethostname", lambda: "gpu-node07.cluster.example")
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    out = tmp_path / "topo"
    assert run_main("topology", "collect", "--output", str(out)) == 0
    err = capsys.readouterr().err
    assert "warning: GPU 3: NVLink 0, 1, 2, 3, 4, 5 inactive" in err
    assert [p.name for p in out.iterdir()] == ["gpu-node07.json"]
    data = json.loads((out / "gpu-node07.json").read_text())
    assert list(data) == ["format", "node", "gpus", "links", "tool", "collected_at"]
    assert data["format"] == "slurm-defrag-topology/1"
    assert data["node"] == "gpu-node07"
    assert data["gpus"] == 8
    assert data["tool"] == "nvidia-smi topo -m"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["collected_at"])
    assert data["links"][3] == [0, 0, 0, -1, 0, 0, 0, 0]
    assert data["links"][0] == [-1, 1, 1, 0, 2, 0, 0, 0]
    assert stat.S_IMODE((out / "gpu-node07.json").stat().st_mode) == 0o644


def test_collect_node_option_and_status_failure_is_a_warning(
    fake_path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_path("dgx-a100.topo.txt", None)
    out = tmp_path / "o"
    assert run_main("topology", "collect", "-o", str(out), "--node", "dgx01") == 0
    assert "link status not read" in capsys.readouterr().err
    assert json.loads((out / "dgx01.json").read_text())["links"] == _full(8, 12)


def test_collect_node_defaults_to_slurmd_nodename(
    fake_path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_path("a100-pcie-nvlink-pairs.topo.txt", None)
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-a-01")
    assert run_main("topology", "collect", "-o", str(tmp_path / "o")) == 0
    assert json.loads((tmp_path / "o" / "gpu-a-01.json").read_text())["node"] == "gpu-a-01"


def test_collect_pcie_node_does_not_ask_for_link_status(fake_path, tmp_path: Path) -> None:
    fake_path("pcie-8x4090.topo.txt", None)  # nvlink --status would fail: never called
    assert run_main("topology", "collect", "-o", str(tmp_path / "o"), "--node", "p1") == 0


def test_missing_nvidia_smi_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_line_error(
        capsys,
        *("topology", "collect", "-o", str(tmp_path), "--node", "n1"),
        *("--nvidia-smi", str(tmp_path / "no-such-nvidia-smi")),
        words=("nvidia-smi topo -m", "not found"),
    )
    assert "--from-file" in line
    assert not list(tmp_path.iterdir())


def test_failing_nvidia_smi_is_one_line(
    fake_path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_path("dgx-a100.topo.txt", None, code=9)
    assert_one_line_error(
        capsys,
        *("topology", "collect", "-o", str(tmp_path / "o"), "--node", "n1"),
        words=("exit status 9", "could not communicate"),
    )


def test_from_file_with_status_file(tmp_path: Path) -> None:
    out = tmp_path / "o"
    code = run_main(
        *("topology", "collect", "-o", str(out), "--node", "v1"),
        *("--from-file", str(FIXTURES / "dgx1-v100.topo.txt")),
        *("--status-file", str(FIXTURES / "dgx1-v100-gpu3-down.nvlink.txt")),
    )
    assert code == 0
    assert json.loads((out / "v1.json").read_text())["links"][3][0] == 0


def test_bad_from_file_is_one_line_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tPIX\t X \n")
    assert_one_line_error(
        capsys,
        *("topology", "collect", "-o", str(tmp_path / "o"), "--node", "n1"),
        *("--from-file", str(bad)),
        words=("bad.txt", "not symmetric"),
    )
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("node", ["../etc", ".hidden", "a/b", "", "x" * 65, "-n"])
def test_unsafe_node_name_is_refused(
    node: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_one_line_error(
        capsys,
        *("topology", "collect", "-o", str(tmp_path), "--node", node),
        *("--from-file", str(FIXTURES / "dgx-a100.topo.txt")),
        words=("--node",),
    )


def test_write_is_atomic_and_replaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topo = parse_topo_matrix(_text("dgx-a100.topo.txt"))
    from datetime import UTC, datetime

    when = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
    target = smi.write_record(tmp_path, smi.record("node01", topo, when))
    first = target.read_text()
    assert json.loads(first)["collected_at"] == "2026-12-02T10:00:00Z"

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(smi.os, "replace", broken_replace)
    pairs = parse_topo_matrix(_text("a100-pcie-nvlink-pairs.topo.txt"))
    with pytest.raises(smi.DefragError, match="cannot write: No space left on device"):
        smi.write_record(tmp_path, smi.record("node01", pairs, when))
    assert target.read_text() == first  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["node01.json"]  # no temp file left
    monkeypatch.undo()
    smi.write_record(tmp_path, smi.record("node01", pairs, when))
    assert json.loads(target.read_text())["gpus"] == 4
    assert [p.name for p in tmp_path.iterdir()] == ["node01.json"]


def test_show_prints_each_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, fixture in (("a", "dgx-a100.topo.txt"), ("b", "a100-pcie-nvlink-pairs.topo.txt")):
        run_main(
            *("topology", "collect", "-o", str(tmp_path), "--node", name),
            *("--from-file", str(FIXTURES / fixture)),
        )
    capsys.readouterr()
    assert run_main("topology", "show", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "a: 8 GPUs, 28 NVLink pairs" in out
    assert "b: 4 GPUs, 2 NVLink pairs" in out
    assert "GPU2   .  .  X 12" in out


def test_show_refuses_a_foreign_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.json").write_text('{"format": "other"}')
    assert_one_line_error(
        capsys, "topology", "show", str(tmp_path), words=("x.json", "slurm-defrag-topology/1")
    )


def test_rows_without_a_header_are_refused() -> None:
    body = _text("a100-pcie-nvlink-pairs.topo.txt").split("\n", 1)[1]
    with pytest.raises(TopologyParseError, match="no header line starting with GPU0"):
        parse_topo_matrix(body, "in.txt")


def test_single_gpu_node() -> None:
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n"
    topo = parse_topo_matrix(text)
    assert (topo.gpus, topo.links) == (1, [[-1]])


def test_vertical_tab_is_a_control_character_not_a_line_break() -> None:
    text = "\tGPU0\tGPU1\nGPU0\t X \tNV4\x0bGPU1\tNV4\t X \n"
    with pytest.raises(TopologyParseError, match=r"line 2: control character '\\x0b'"):
        parse_topo_matrix(text, "in.txt")


def test_nvidia_smi_printing_bytes_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\nprintf '\\tGPU0\\377\\n'\n")
    script.chmod(0o755)
    assert_one_line_error(
        capsys,
        *("topology", "collect", "-o", str(tmp_path / "o"), "--node", "n1"),
        *("--nvidia-smi", str(script)),
        # the runner turns the bad byte into U+FFFD (never a failed decode): the header
        # "GPU0\ufffd" is then not a GPU column, and that is the one line
        words=("nvidia-smi topo -m", "GPU0"),
    )
