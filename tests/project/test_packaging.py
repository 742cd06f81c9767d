"""Every file the wheel needs is in the service image's build context (#17)."""

from __future__ import annotations

import re
import tomllib

from infra import ROOT


def test_data_files_are_copied_into_the_service_image() -> None:
    """The service image builds the wheel from /build: a data file that .dockerignore or
    the Dockerfile leaves out fails that build (it did, once)."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    files = [f for group in data["data-files"].values() for f in group]
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    dockerfile = (ROOT / "docker" / "defrag" / "Dockerfile").read_text()
    copied = " ".join(re.findall(r"^COPY (.+)$", dockerfile, re.MULTILINE))
    for f in files:
        assert (ROOT / f).is_file(), f
        assert f"!{f}" in ignore, f"{f} is not let through .dockerignore"
        assert f in copied.split(), f"{f} is not copied by docker/defrag/Dockerfile"
