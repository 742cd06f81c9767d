"""``POST /trigger`` throttling: triggers coalesce into at most one pending cycle.

Anyone who can reach the endpoint can trigger (the epilog, or any local user), so a
trigger may only ask for a cycle *sooner*, never for more cycles than the service can
afford: a cycle started by a trigger starts at least ``min_interval_s`` after the previous
cycle started, and while one is pending every further trigger is folded into it. A burst
of job ends (an array job finishing, or a loop of ``curl``) costs at most one cycle now and
one cycle ``min_interval_s`` later.

Pure bookkeeping with an injectable clock; :class:`~slurm_defrag.service.runner.Service`
turns a :class:`Ticket` into a scheduler run and the HTTP layer into 202 or 429.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slurm_defrag.errors import InputError


@dataclass(frozen=True)
class Ticket:
    """What became of one trigger."""

    scheduled: bool
    """True: this trigger scheduled a cycle (answered 202). False: a cycle was already
    pending and this trigger is folded into it (answered 429, nothing new scheduled)."""
    delay_s: float
    """Seconds until the pending cycle may start (0: now, or as soon as the running one
    ends)."""


class TriggerGate:
    """Coalesces triggers: at most one pending, starting ``min_interval_s`` after the
    previous cycle's start at the earliest. Thread-safe (HTTP threads call :meth:`request`,
    the scheduler's worker :meth:`cycle_started`)."""

    def __init__(self, min_interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_interval_s = min_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last_start: float | None = None
        self._due: float | None = None  # clock time the pending cycle may start; None: none

    def request(self) -> Ticket:
        with self._lock:
            now = self._clock()
            if self._due is not None:
                return Ticket(False, max(0.0, self._due - now))
            earliest = now if self._last_start is None else self._last_start + self.min_interval_s
            self._due = max(now, earliest)
            return Ticket(True, self._due - now)

    def cycle_started(self) -> None:
        """Any cycle, scheduled or triggered, serves the pending trigger: it reads Slurm
        after the trigger came in."""
        with self._lock:
            self._last_start = self._clock()
            self._due = None

    def due_now(self) -> bool:
        """A trigger is pending and may start its cycle now."""
        with self._lock:
            return self._due is not None and self._due <= self._clock()

    @property
    def pending(self) -> bool:
        with self._lock:
            return self._due is not None


SECRET_HEADER = "X-Defrag-Trigger-Secret"
"""The request header carrying the shared secret, when ``trigger_secret_file`` is set."""

MIN_SECRET_BYTES = 16
MAX_SECRET_BYTES = 1024


def read_secret(path: Path) -> bytes:
    """The shared secret in ``path``: its content less trailing whitespace (a final newline
    from ``echo`` or an editor). Printable ASCII without spaces, so it fits in one header
    line and nobody can smuggle a second header in; 16 bytes at least (``openssl rand -hex
    16`` gives 32)."""
    where = f"trigger_secret_file: {path}"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{where}: cannot read: {exc.strerror or exc}") from None
    secret = raw.rstrip(b" \t\r\n")
    if not all(0x21 <= b <= 0x7E for b in secret):
        raise InputError(
            f"{where}: the secret must be one line of printable ASCII without "
            "spaces (e.g. from `openssl rand -hex 32`)"
        )
    if not MIN_SECRET_BYTES <= len(secret) <= MAX_SECRET_BYTES:
        raise InputError(
            f"{where}: the secret has {len(secret)} bytes; it needs "
            f"{MIN_SECRET_BYTES} to {MAX_SECRET_BYTES}"
        )
    return secret


def secret_matches(given: str | None, secret: bytes) -> bool:
    """Constant-time comparison of a header value with the secret (timing tells an attacker
    nothing about how much of a guess was right)."""
    if given is None:
        return False
    # http.client decodes header values as ISO-8859-1, so this gives back the sent bytes.
    return hmac.compare_digest(given.strip().encode("latin-1", "replace"), secret)
