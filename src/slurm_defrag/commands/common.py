"""Options and helpers shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # pydantic models: imported when used, to keep startup fast
    from slurm_defrag.domain.cluster import ClusterSnapshot

# readable=False on every path option: the command opens the file itself and says what is
# wrong on one line (exit 3) like for a missing file; typer's own check answered an
# unreadable file with a usage box and exit 2 (issue #45).
SnapshotOpt = Annotated[
    Path | None,
    typer.Option(
        "--snapshot",
        "-s",
        help="Snapshot JSON file, - for standard input (default: read the live cluster).",
        readable=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]


def load_or_read_snapshot(path: Path | None) -> ClusterSnapshot:
    """The snapshot file if given, else a live read through the configured Slurm backend.

    The backend and its connection come from ``SLURM_DEFRAG_SLURM_*`` (see
    :class:`slurm_defrag.slurm.connection.SlurmSettings`); ``slurm-defrag snapshot`` takes
    them as options too.
    """
    from slurm_defrag.snapshot_file import load_snapshot

    if path is not None:
        return load_snapshot(path)
    from slurm_defrag.slurm.backends import open_backend
    from slurm_defrag.slurm.connection import load_settings

    return open_backend(load_settings()).snapshot()


def command_words(value: str, option: str = "--command-prefix") -> list[str]:
    """A shell-quoted option value as argv words (split here, never run by a shell);
    an unbalanced quote is one error line naming the option, not a traceback."""
    import shlex

    from slurm_defrag.errors import InputError

    try:
        return shlex.split(value)
    except ValueError as exc:
        raise InputError(f"{option}: {exc} in {value!r}") from None
