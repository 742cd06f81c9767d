"""``POST /trigger`` (run a cycle now) and ``GET /healthz`` on a local port.

The slurmctld epilog calls ``/trigger`` when a job ends, so freed GPUs are used at once
instead of at the next interval. Standard library only: two routes do not justify a web
framework, and the server runs in one daemon thread beside the scheduler.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from slurm_defrag.errors import InputError

log = logging.getLogger(__name__)


class ControlServer:
    """Serves the two routes until :meth:`close`; ``port`` 0 picks a free port."""

    def __init__(self, host: str, port: int, trigger: Callable[[], None],
                 health: Callable[[], tuple[bool, dict[str, Any]]]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/trigger":
                    self._send(404, {"error": "not found"})
                    return
                trigger()
                self._send(202, {"triggered": True})

            def do_GET(self) -> None:
                if self.path.rstrip("/") != "/healthz":
                    self._send(404, {"error": "not found"})
                    return
                ok, body = health()
                self._send(200 if ok else 503, body)

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body, default=str).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("http: " + format, *args)

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise InputError(f"http_host/http_port: cannot listen on {host}:{port}: "
                             f"{exc.strerror or exc}") from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="http",
                                        daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()
        log.info("trigger/health endpoint on http://%s:%d",
                 self._server.server_address[0], self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
