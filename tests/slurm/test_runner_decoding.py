"""A byte that is not UTF-8 in what a Slurm command prints never fails the read."""

from __future__ import annotations

import sys

from slurm_defrag.slurm.command_runner import run, subprocess_runner


def _printer(data: bytes) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({data!r})"]


def test_bad_bytes_in_json_leave_the_document_valid() -> None:
    import json

    out = run(subprocess_runner, [], _printer(b'{"name": "j\xffob", "id": 7}\n'), 30)
    assert json.loads(out) == {"name": "j\ufffdob", "id": 7}


def test_a_latin1_comment_in_a_config_file_reads() -> None:
    out = run(subprocess_runner, [], _printer(b"# J\xfcrgen's nodes\nNodeName=n1 Name=gpu\n"), 30)
    assert out.splitlines()[1] == "NodeName=n1 Name=gpu"


def test_valid_utf8_is_unchanged() -> None:
    assert run(subprocess_runner, [], _printer("Jürgen ✓\n".encode()), 30) == "Jürgen ✓\n"


def test_rest_answers_with_bad_bytes_decode_too() -> None:
    import httpx

    from slurm_defrag.slurm.connection import SlurmSettings
    from slurm_defrag.slurm.rest import RestSlurm

    rest = RestSlurm(SlurmSettings(backend="rest"))
    resp = httpx.Response(200, content=b'{"jobs": [{"name": "j\xffob"}]}')
    assert rest._decode(resp, "GET /jobs") == {"jobs": [{"name": "j\ufffdob"}]}
