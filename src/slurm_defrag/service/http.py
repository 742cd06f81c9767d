"""The service's local HTTP endpoint: ``POST /trigger``, ``GET /healthz`` and read-only pages.

The slurmctld epilog calls ``/trigger`` when a job ends, so freed GPUs are used at once
instead of at the next interval. Other features (Prometheus ``/metrics``, the web page)
add read-only ``GET`` routes through :class:`Response`-returning callables; this module
only routes, so each feature stays in its own module. Standard library only: a handful of
routes do not justify a web framework, and the server runs in daemon threads beside the
scheduler.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from slurm_defrag.errors import InputError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def json(cls, body: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(body, default=str).encode())


Query = Mapping[str, list[str]]
Page = Callable[[Query], Response]
"""A read-only GET route: query parameters in, response out. It must not change state."""


class ControlServer:
    """Serves the routes until :meth:`close`; ``port`` 0 picks a free port."""

    def __init__(self, host: str, port: int, trigger: Callable[[], None],
                 health: Callable[[], tuple[bool, dict[str, Any]]],
                 pages: Mapping[str, Page] | None = None) -> None:
        routes: dict[str, Page] = dict(pages or {})

        def healthz(_: Query) -> Response:
            ok, body = health()
            return Response.json(body, 200 if ok else 503)

        routes["/healthz"] = healthz

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/trigger":
                    self._send(Response.json({"error": "not found"}, 404))
                    return
                trigger()
                self._send(Response.json({"triggered": True}, 202))

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                page = routes.get(url.path.rstrip("/") or "/")
                if page is None:
                    self._send(Response.json({"error": "not found"}, 404))
                    return
                try:
                    self._send(page(parse_qs(url.query)))
                except Exception:  # a broken page must not kill the server thread
                    log.exception("http: GET %s failed", url.path)
                    self._send(Response.json({"error": "internal error"}, 500))

            def _send(self, resp: Response) -> None:
                self.send_response(resp.status)
                self.send_header("Content-Type", resp.content_type)
                self.send_header("Content-Length", str(len(resp.body)))
                self.end_headers()
                self.wfile.write(resp.body)

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
        log.info("HTTP endpoint on http://%s:%d",
                 self._server.server_address[0], self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
