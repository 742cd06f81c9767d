"""Where this release's Slurm-side hooks (``slurm-plugins/``) are on this machine.

The hooks run inside Slurm (job_submit.lua in slurmctld, the epilog), so sites copy them
from here; slurm-defrag itself reads them to compare with what a controller has installed
(``doctor``) and to run the real job_submit.lua in the simulator. The wheel installs them
under ``<prefix>/share/slurm-defrag/slurm-plugins`` (pyproject data-files); an editable
install or a run from a checkout finds the checkout's own copy first. The working
directory is never looked in: the simulator runs the script (lupa can reach the shell) and
``doctor`` trusts it as the reference, so whatever ``./slurm-plugins`` holds must not count.
"""

from __future__ import annotations

import site
import sys
from pathlib import Path

SHARE = Path("share") / "slurm-defrag" / "slurm-plugins"


def candidates() -> list[Path]:
    """Places looked in, in order: the checkout this module is in, the install prefix
    (a venv or the system), the user base (``pip install --user``)."""
    return [
        Path(__file__).resolve().parents[2] / "slurm-plugins",
        Path(sys.prefix) / SHARE,
        Path(site.getuserbase()) / SHARE,
    ]


def plugins_dir(explicit: Path | None = None) -> Path | None:
    """The first of ``explicit`` (only it, when given) or :func:`candidates` holding
    job_submit.lua; None when there is none."""
    for c in [explicit] if explicit is not None else candidates():
        if (c / "job_submit.lua").is_file():
            return c
    return None
