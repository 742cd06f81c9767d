"""Where the traces live: ``--traces DIR``, else ``$SLURM_DEFRAG_TRACES``; nothing guessed.

The folder holds ``alibaba-gpu-v2023/`` (the openb trace). The package never looks in a
machine path or beside a source checkout, so an installed wheel behaves the same everywhere
and a missing trace is one clear line saying where to get it.
"""

from __future__ import annotations

import os
from pathlib import Path

from slurm_defrag.errors import InputError

ENV_VAR = "SLURM_DEFRAG_TRACES"

WHERE_TO_GET = (
    "the openb trace (Weng et al., FGD, USENIX ATC '23) is published in the alibaba/clusterdata "
    "repository, folder cluster-trace-gpu-v2023/csv: copy its CSV files into "
    "DIR/alibaba-gpu-v2023/"
)


def trace_root(explicit: Path | None = None) -> Path:
    """The folder that holds ``alibaba-gpu-v2023/`` and the other traces.

    ``explicit`` (the ``--traces`` option) wins over ``$SLURM_DEFRAG_TRACES``; a folder that
    is named but does not exist is an error, as is naming none.
    """
    if explicit is not None:
        source, root = "--traces", explicit
    elif os.environ.get(ENV_VAR):
        source, root = ENV_VAR, Path(os.environ[ENV_VAR])
    else:
        raise InputError(f"no trace folder: give --traces DIR or set {ENV_VAR}; {WHERE_TO_GET}")
    if not root.is_dir():
        raise InputError(f"{source} {root}: not a folder; {WHERE_TO_GET}")
    return root
