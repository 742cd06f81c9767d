"""slurm-plugins/epilog-slurmctld run directly (no Slurm): it returns 0 at once whatever the
service does, POSTs the trigger in the background, and decides "GPU job" as documented.

The live test (test_live_epilog.py) runs the same script as a real EpilogSlurmctld.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .plugins_support import PLUGINS, TriggerListener, free_port, require

EPILOG = PLUGINS / "epilog-slurmctld"
# Tools the script may use; a PATH made of links to these (minus one) shows the fallbacks.
TOOLS = ("bash", "setsid", "timeout", "date", "grep", "python3", "curl", "sleep", "env")


@pytest.fixture
def listener() -> Iterator[TriggerListener]:
    server = TriggerListener()
    yield server
    server.close()


def run_epilog(tmp: Path, env: dict[str, str], conf: str | None = None) -> float:
    """Run the epilog like slurmctld does; return how long it took."""
    require(shutil.which("setsid") is not None, "setsid (util-linux)")
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_PARTITION": "batch",
        "SLURM_JOB_NODELIST": "node[01-02]",
        "SLURM_JOB_EXIT_CODE": "0",
        "DEFRAG_EPILOG_CONF": str(tmp / "defrag-epilog.conf"),
        "DEFRAG_EPILOG_LOG": str(tmp / "epilog.log"),
    }
    if conf is not None:
        (tmp / "defrag-epilog.conf").write_text(conf, encoding="utf-8")
    start = time.monotonic()
    proc = subprocess.run(
        [str(EPILOG)], env={**base, **env}, capture_output=True, text=True, timeout=30, check=False
    )
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    return took


def wait_log(tmp: Path, needle: str, timeout_s: float = 5) -> str:
    log = tmp / "epilog.log"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(encoding="utf-8") if log.exists() else ""
        if needle in text:
            return text
        time.sleep(0.02)
    raise AssertionError(f"{needle!r} not logged within {timeout_s} s: {text!r}")


def tool_path(tmp: Path, without: str = "", extra: dict[str, str] | None = None) -> str:
    """A PATH with the usual tools except ``without``, plus small fake scripts."""
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    for tool in TOOLS:
        # python3 may be a pyenv shim that needs the full PATH: link the real interpreter
        real = os.path.realpath(sys.executable) if tool == "python3" else shutil.which(tool)
        if tool != without and real is not None and not (bindir / tool).exists():
            (bindir / tool).symlink_to(real)
    for name, body in (extra or {}).items():
        (bindir / name).write_text("#!/bin/bash\n" + body, encoding="utf-8")
        (bindir / name).chmod(0o755)
    return str(bindir)


def test_posts_the_trigger_in_the_background(tmp_path: Path, listener: TriggerListener) -> None:
    require(shutil.which("curl") is not None, "curl")
    url = f"http://127.0.0.1:{listener.port}/trigger"
    took = run_epilog(tmp_path, {"DEFRAG_GPU_CHECK": "always"}, conf=f"DEFRAG_TRIGGER_URL={url}\n")
    assert took < 0.5
    hit = listener.wait_for('"job_id":"4242"', timeout_s=2)
    assert hit is not None, "no trigger within 2 s"
    assert hit.path == "/trigger"
    assert json.loads(hit.body) == {
        "event": "job_end",
        "job_id": "4242",
        "partition": "batch",
        "nodes": "node[01-02]",
        "exit_code": "0",
        "source": "epilog-slurmctld",
    }
    wait_log(tmp_path, "triggered " + url)


def test_service_down_costs_nothing(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/trigger"
    took = run_epilog(tmp_path, {"DEFRAG_GPU_CHECK": "always", "DEFRAG_TRIGGER_URL": url})
    assert took < 0.5
    wait_log(tmp_path, "trigger failed")


def test_hanging_service_is_cut_off_after_the_timeout(tmp_path: Path) -> None:
    require(shutil.which("curl") is not None, "curl")
    hang = TriggerListener(hang=True)
    try:
        url = f"http://127.0.0.1:{hang.port}/trigger"
        start = time.monotonic()
        took = run_epilog(tmp_path, {"DEFRAG_GPU_CHECK": "always", "DEFRAG_TRIGGER_URL": url})
        assert took < 0.5, "the epilog itself must not wait for the service"
        text = wait_log(tmp_path, "trigger failed", timeout_s=4)
        assert "curl exit 28" in text  # curl's "operation timed out"
        assert time.monotonic() - start < 2.5
    finally:
        hang.close()


def test_python_fallback_without_curl(tmp_path: Path, listener: TriggerListener) -> None:
    url = f"http://127.0.0.1:{listener.port}/trigger"
    path = tool_path(tmp_path, without="curl")
    run_epilog(tmp_path, {"PATH": path, "DEFRAG_GPU_CHECK": "always", "DEFRAG_TRIGGER_URL": url})
    assert listener.wait_for('"job_id":"4242"', timeout_s=3) is not None


# -- which jobs had GPUs: fields of the record, never its text (issue #40) ---------------

# Fields of a job record in Slurm's order (slurm_sprint_job_info), one per line of the
# multi-line form; free-text values (name, comment, paths) are the user's.
BASE = (
    "UserId=bob(2002) GroupId=bob(2002) MCS_label=N/A",
    "JobState=COMPLETED Reason=None Dependency=(null)",
    "NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:*",
    "Command=(null)",
)


def record(job_id: str, name: str, *fields: str, workdir: str = "/jobs") -> tuple[str, str]:
    """One job as ``scontrol show job`` prints it, and as ``scontrol -o show job`` does:
    values verbatim (a newline in one stays a newline), "\n   " or " " between fields."""
    lines = [*BASE, f"WorkDir={workdir}", *fields, "StdOut=/jobs/out"]
    multi = f"JobId={job_id} JobName={name}\n" + "".join(f"   {f}\n" for f in lines) + "   \n\n"
    one = f"JobId={job_id} JobName={name} " + " ".join(lines) + " \n"
    return multi, one


def scontrol_stub(tmp: Path, *records: tuple[str, str]) -> str:
    """A PATH whose scontrol prints these records, in the form its arguments ask for."""
    (tmp / "multi.txt").write_text("".join(m for m, _ in records), encoding="utf-8")
    (tmp / "one.txt").write_text("".join(o for _, o in records), encoding="utf-8")
    cat = shutil.which("cat")
    return tool_path(
        tmp,
        extra={
            "scontrol": f'if [ "$1" = -o ]; then exec {cat} {tmp}/one.txt; fi\n'
            f"exec {cat} {tmp}/multi.txt\n"
        },
    )


def epilog_for(tmp: Path, listener: TriggerListener, *records: tuple[str, str]) -> bool:
    """Run the epilog for job 7 with these records; True if it sent the trigger (whatever
    the answer: under load the listener may be slow)."""
    url = f"http://127.0.0.1:{listener.port}/trigger"
    path = scontrol_stub(tmp, *records)
    env = {"PATH": path, "DEFRAG_TRIGGER_URL": url, "SLURM_JOB_ID": "7"}
    run_epilog(tmp, env | {"DEFRAG_TRIGGER_TIMEOUT": "5"})
    text = wait_log(tmp, "7: ", timeout_s=15)
    return "no trigger" not in text


def test_gpu_check_asks_scontrol(tmp_path: Path, listener: TriggerListener) -> None:
    for tres in ("TresPerNode=gres:gpu:2", "TresPerJob=gres/gpu:a100:4", "TresPerTask=gres/gpu=1"):
        (tmp_path / "epilog.log").unlink(missing_ok=True)
        assert epilog_for(tmp_path, listener, record("7", "x", tres)), tres


def test_the_recorded_gpu_count_triggers(tmp_path: Path, listener: TriggerListener) -> None:
    """What job_submit.lua records in the AdminComment, a line of its own."""
    admin = "AdminComment=note defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1 "
    assert epilog_for(tmp_path, listener, record("7", "x", admin))
    (tmp_path / "epilog.log").unlink()
    zero = "AdminComment=defrag:nvlink=0 defrag:gpn=0 defrag:nodes=1 "
    assert not epilog_for(tmp_path, listener, record("7", "x", zero))


def test_cpu_jobs_do_not_trigger(tmp_path: Path, listener: TriggerListener) -> None:
    assert not epilog_for(
        tmp_path, listener, record("7", "x", "Comment=gpu-free ", "TresPerNode=gres:nic:1")
    )
    wait_log(tmp_path, "no GPUs, no trigger")


def test_gpu_words_in_the_users_fields_do_not_trigger(
    tmp_path: Path, listener: TriggerListener
) -> None:
    """Defect (#40): the epilog grepped the whole record, so a CPU job named or commented
    ``defrag:gpn=1`` (or ``TresPerNode=gres/gpu:1``) woke the service when it ended."""
    forged = "defrag:gpn=1 TresPerNode=gres/gpu:1 AdminComment=defrag:gpn=1"
    job = record("7", forged, f"Comment={forged} ", workdir=f"/w {forged}")
    assert not epilog_for(tmp_path, listener, job)
    wait_log(tmp_path, "no GPUs, no trigger")


def test_a_line_break_in_a_value_is_not_trusted(tmp_path: Path, listener: TriggerListener) -> None:
    """``--chdir $'/x\n   AdminComment=defrag:gpn=1'`` forges a line of the multi-line form;
    the one-line form shows the break: the record is not trusted, no trigger."""
    for workdir in ("/x\n   AdminComment=defrag:gpn=1", "/x\n   TresPerNode=gres/gpu:1"):
        (tmp_path / "epilog.log").unlink(missing_ok=True)
        assert not epilog_for(tmp_path, listener, record("7", "x", workdir=workdir))
        assert "a value holds a line break" in wait_log(tmp_path, "not trusted")


def test_a_forged_record_never_speaks_for_the_job(
    tmp_path: Path, listener: TriggerListener
) -> None:
    """A line break followed by a whole record ("JobId=99 ..."): what follows belongs to
    that record, not to the job; one claiming the job's own id makes it untrusted."""
    other = "Comment=x\nJobId=99 JobName=f TresPerNode=gres/gpu:8 "
    assert not epilog_for(tmp_path, listener, record("7", "x", other))
    wait_log(tmp_path, "no GPUs, no trigger")
    (tmp_path / "epilog.log").unlink()
    same = "Comment=x\nJobId=7 JobName=f TresPerNode=gres/gpu:8 "
    assert not epilog_for(tmp_path, listener, record("7", "x", same))
    wait_log(tmp_path, "not trusted")


def test_heterogeneous_job_records_are_told_apart(
    tmp_path: Path, listener: TriggerListener
) -> None:
    """The leader of a heterogeneous job prints every component: only its own counts."""
    leader = record("7", "x", "TresPerNode=gres/gpu:1")
    other = record("8", "x", "TresPerNode=gres/gpu:1")
    cpu = record("7", "x")
    assert epilog_for(tmp_path, listener, record("6", "x"), leader)
    (tmp_path / "epilog.log").unlink()
    assert not epilog_for(tmp_path, listener, cpu, other)


def test_an_oversized_record_is_not_trusted(tmp_path: Path, listener: TriggerListener) -> None:
    job = record("7", "x", "TresPerNode=gres/gpu:1", "Comment=" + "y" * 300_000 + " ")
    assert not epilog_for(tmp_path, listener, job)
    assert "over 262144 bytes" in wait_log(tmp_path, "not trusted")


def test_unknown_job_kind_triggers_anyway(tmp_path: Path, listener: TriggerListener) -> None:
    """scontrol failing is no reason to miss freed GPUs: a spare cycle is cheap."""
    url = f"http://127.0.0.1:{listener.port}/trigger"
    broken = tool_path(tmp_path, extra={"scontrol": "exit 1"})
    run_epilog(tmp_path, {"PATH": broken, "DEFRAG_TRIGGER_URL": url, "SLURM_JOB_ID": "9"})
    assert listener.wait_for('"job_id":"9"', timeout_s=3) is not None


def test_config_file_is_data_not_code(tmp_path: Path, listener: TriggerListener) -> None:
    marker = tmp_path / "pwned"
    url = f"http://127.0.0.1:{listener.port}/trigger"
    conf = (
        "# comments and unknown keys are ignored\n"
        f"touch {marker}\n"
        f"EVIL=$(touch {marker})\n"
        f'DEFRAG_TRIGGER_URL = "{url}"  # spaces and quotes are fine\n'
        "DEFRAG_GPU_CHECK=always\n"
    )
    run_epilog(tmp_path, {}, conf=conf)
    assert listener.wait_for('"job_id":"4242"', timeout_s=3) is not None
    assert not marker.exists()


def test_environment_wins_and_empty_url_disables(tmp_path: Path, listener: TriggerListener) -> None:
    url = f"http://127.0.0.1:{listener.port}/trigger"
    conf = f"DEFRAG_TRIGGER_URL={url}\nDEFRAG_GPU_CHECK=always\n"
    run_epilog(tmp_path, {"DEFRAG_TRIGGER_URL": ""}, conf=conf)
    run_epilog(tmp_path, {"SLURM_JOB_ID": ""}, conf=conf)
    assert listener.wait_for("job_id", timeout_s=1) is None


def test_odd_values_are_escaped_in_the_body(tmp_path: Path, listener: TriggerListener) -> None:
    url = f"http://127.0.0.1:{listener.port}/trigger"
    run_epilog(
        tmp_path,
        {
            "DEFRAG_GPU_CHECK": "always",
            "DEFRAG_TRIGGER_URL": url,
            "SLURM_JOB_PARTITION": 'we"ird\\part\tx',
        },
    )
    hit = listener.wait_for('"job_id":"4242"', timeout_s=3)
    assert hit is not None
    assert json.loads(hit.body)["partition"] == 'we"ird\\part x'


# -- issue #15: the shared secret and coalesced answers ----------------------------------

SECRET = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("without", ["", "curl"])
def test_secret_is_sent_as_a_header_from_the_file(
    tmp_path: Path, listener: TriggerListener, without: str
) -> None:
    """Defect (#15): the service may now require a shared secret on /trigger; the epilog
    sends it from DEFRAG_TRIGGER_SECRET_FILE (curl: on stdin, never in its argv)."""
    require(without == "curl" or shutil.which("curl") is not None, "curl")
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n", encoding="utf-8")
    url = f"http://127.0.0.1:{listener.port}/trigger"
    env = {"DEFRAG_GPU_CHECK": "always", "DEFRAG_TRIGGER_URL": url}
    if without:
        env["PATH"] = tool_path(tmp_path, without=without)
    run_epilog(tmp_path, env, conf=f"DEFRAG_TRIGGER_SECRET_FILE={secret}\n")
    hit = listener.wait_for('"job_id":"4242"', timeout_s=3)
    assert hit is not None
    assert hit.headers.get("X-Defrag-Trigger-Secret") == SECRET


def test_no_secret_no_header(tmp_path: Path, listener: TriggerListener) -> None:
    require(shutil.which("curl") is not None, "curl")
    url = f"http://127.0.0.1:{listener.port}/trigger"
    run_epilog(tmp_path, {"DEFRAG_GPU_CHECK": "always", "DEFRAG_TRIGGER_URL": url})
    hit = listener.wait_for('"job_id":"4242"', timeout_s=3)
    assert hit is not None
    assert "X-Defrag-Trigger-Secret" not in hit.headers
    wait_log(tmp_path, "triggered " + url)


def test_a_bad_secret_file_sends_nothing(tmp_path: Path, listener: TriggerListener) -> None:
    url = f"http://127.0.0.1:{listener.port}/trigger"
    bad = tmp_path / "secret"
    bad.write_text("two words\n", encoding="utf-8")
    for path, why in ((tmp_path / "missing", "cannot read"), (bad, "printable ASCII")):
        (tmp_path / "epilog.log").unlink(missing_ok=True)
        run_epilog(
            tmp_path,
            {
                "DEFRAG_GPU_CHECK": "always",
                "DEFRAG_TRIGGER_URL": url,
                "DEFRAG_TRIGGER_SECRET_FILE": str(path),
            },
        )
        assert why in wait_log(tmp_path, "trigger not sent")
    assert listener.wait_for("job_id", timeout_s=0.5) is None


@pytest.mark.parametrize("without", ["", "curl"])
def test_429_coalesced_counts_as_sent(tmp_path: Path, without: str) -> None:
    """The service answers 429 when the trigger joined a cycle already pending: not a
    failure to log."""
    require(without == "curl" or shutil.which("curl") is not None, "curl")
    busy = TriggerListener(status=429)
    try:
        url = f"http://127.0.0.1:{busy.port}/trigger"
        env = {"DEFRAG_GPU_CHECK": "always", "DEFRAG_TRIGGER_URL": url}
        if without:
            env["PATH"] = tool_path(tmp_path, without=without)
        run_epilog(tmp_path, env)
        wait_log(tmp_path, "triggered " + url)
    finally:
        busy.close()
