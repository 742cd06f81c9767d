"""The kill switch: ``mode = "off"`` or the presence of a file stops all action.

Checked at the top of every cycle and again before every step, so the service stops
acting within the cycle that sees it (a step already sent to Slurm completes).
"""

from __future__ import annotations

from pathlib import Path


class KillSwitch:
    def __init__(self, path: Path | None) -> None:
        self.path = path

    def engaged(self) -> str | None:
        """Why action is stopped, or None when the service may act."""
        if self.path is not None and self.path.exists():
            return f"kill switch {self.path} present"
        return None
