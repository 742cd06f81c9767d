"""systemd's readiness and watchdog protocol (sd_notify(3)), without a library.

With ``Type=notify`` systemd passes ``$NOTIFY_SOCKET`` (a datagram socket; a leading ``@``
is the abstract namespace) and, with ``WatchdogSec=``, ``$WATCHDOG_USEC``. The service
sends ``READY=1`` once it serves, ``WATCHDOG=1`` while cycles run on time (so a hung cycle
— a Slurm command that never returns, a dead scheduler — gets the service restarted),
``STATUS=`` with the last cycle's outcome for ``systemctl status``, and ``STOPPING=1``.
Outside systemd every call is a no-op.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)


def notify(message: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``message`` (``KEY=value`` lines) to systemd; False when not under systemd."""
    env = os.environ if environ is None else environ
    path = env.get("NOTIFY_SOCKET", "")
    if not path or path[0] not in "/@":
        return False
    address = "\0" + path[1:] if path[0] == "@" else path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(message.encode("utf-8", "replace"), address)
    except OSError as exc:  # systemd gone or socket not ours: nothing to tell
        log.debug("sd_notify %r: %s", message.split("\n", 1)[0], exc)
        return False
    return True


def watchdog_interval_s(environ: Mapping[str, str] | None = None) -> float | None:
    """How often to send ``WATCHDOG=1`` (half of ``WatchdogSec``), or None without one.

    ``$WATCHDOG_PID``, when set, must be this process (a child must not feed the parent's
    watchdog).
    """
    env = os.environ if environ is None else environ
    usec, pid = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
    if not (usec.isascii() and usec.isdigit()) or int(usec) == 0 or len(usec) > 15:
        return None
    if pid and pid != str(os.getpid()):
        return None
    return int(usec) / 2e6
