"""The service's local HTTP endpoint: ``POST /trigger``, ``GET /healthz`` and read-only pages.

The slurmctld epilog calls ``/trigger`` when a job ends, so freed GPUs are used at once
instead of at the next interval. Other features (Prometheus ``/metrics``, the web page)
add read-only ``GET`` routes through :class:`Response`-returning callables; this module
only routes, so each feature stays in its own module. Standard library only: a handful of
routes do not justify a web framework, and the server runs in daemon threads beside the
scheduler.

Access rules, the same for every route: only loopback clients (127.0.0.0/8, ::1) are
served unless ``allow`` adds networks, others get 403 before anything is read or run.
Pages answer ``GET`` and ``HEAD`` only (other methods: 405), ``/trigger`` only ``POST``.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Any
from urllib.parse import parse_qs, urlsplit

from slurm_defrag.errors import InputError

log = logging.getLogger(__name__)

Network = IPv4Network | IPv6Network

LOOPBACK: tuple[Network, ...] = (ip_network("127.0.0.0/8"), ip_network("::1/128"))
"""Always served: the epilog on the controller host, an operator's ssh tunnel."""

READ_METHODS = ("GET", "HEAD")
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")

# Sent with every answer: nothing here may be cached, sniffed, framed or load foreign code.
_SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}


def _json_default(value: Any) -> Any:
    # ISO 8601 with the "T" so that browsers' Date() parses it everywhere.
    return value.isoformat() if isinstance(value, datetime) else str(value)


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def json(cls, body: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(body, default=_json_default).encode())


Query = Mapping[str, list[str]]
Page = Callable[[Query], Response]
"""A read-only GET route: query parameters in, response out. It must not change state."""


def client_allowed(address: str, allow: Iterable[Network] = ()) -> bool:
    """True if a client at ``address`` may be served: loopback always, ``allow`` on top.

    An IPv4 client of a dual-stack socket shows up as ``::ffff:a.b.c.d`` and is judged by
    its IPv4 address; anything unparsable (a Unix socket peer, garbage) is refused.
    """
    try:
        ip = ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id (fe80::1%eth0)
    except ValueError:
        return False
    if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in (*LOOPBACK, *allow))


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class ControlServer:
    """Serves the routes until :meth:`close`; ``port`` 0 picks a free port.

    ``trigger`` / ``health`` None leave ``/trigger`` / ``/healthz`` out (``slurm-defrag
    web`` has no cycle to trigger). ``allow``: networks served besides loopback.
    """

    def __init__(self, host: str, port: int, trigger: Callable[[], None] | None,
                 health: Callable[[], tuple[bool, dict[str, Any]]] | None,
                 pages: Mapping[str, Page] | None = None,
                 allow: Iterable[Network] = ()) -> None:
        routes: dict[str, Page] = dict(pages or {})
        allowed = tuple(allow)

        if health is not None:
            def healthz(_: Query) -> Response:
                ok, body = health()
                return Response.json(body, 200 if ok else 503)

            routes["/healthz"] = healthz

        class Handler(BaseHTTPRequestHandler):
            # do_GET, do_HEAD, ... are set below: every method goes through _handle, so the
            # address check comes first whatever the method.
            def _handle(self, method: str) -> None:
                client = str(self.client_address[0])
                if not client_allowed(client, allowed):
                    log.info("http: refused %s %s from %s (not in http_allow)", method,
                             self.path, client)
                    self._send(Response.json({"error": "forbidden"}, 403))
                    return
                url = urlsplit(self.path)
                path = url.path.rstrip("/") or "/"
                if path == "/trigger" and trigger is not None:
                    if method != "POST":
                        self._refuse_method(("POST",))
                        return
                    trigger()
                    self._send(Response.json({"triggered": True}, 202))
                    return
                page = routes.get(path)
                if page is None:
                    self._send(Response.json({"error": "not found"}, 404))
                elif method not in READ_METHODS:
                    self._refuse_method(READ_METHODS)
                else:
                    self._send(self._render(page, url.path, url.query), body=method == "GET")

            @staticmethod
            def _render(page: Page, path: str, query: str) -> Response:
                try:
                    return page(parse_qs(query))
                except Exception:  # a broken page must not kill the server thread
                    log.exception("http: GET %s failed", path)
                    return Response.json({"error": "internal error"}, 500)

            def _refuse_method(self, allowed_methods: tuple[str, ...]) -> None:
                self._send(Response.json({"error": "method not allowed"}, 405),
                           extra={"Allow": ", ".join(allowed_methods)})

            def _send(self, resp: Response, body: bool = True,
                      extra: Mapping[str, str] | None = None) -> None:
                self.send_response(resp.status)
                self.send_header("Content-Type", resp.content_type)
                self.send_header("Content-Length", str(len(resp.body)))
                for name, value in {**_SECURITY_HEADERS, **(extra or {})}.items():
                    self.send_header(name, value)
                self.end_headers()
                if body:
                    self.wfile.write(resp.body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("http: " + format, *args)

        for method in (*READ_METHODS, *WRITE_METHODS):
            setattr(Handler, f"do_{method}", lambda self, m=method: self._handle(m))

        server_class = _Server6 if ":" in host else ThreadingHTTPServer
        try:
            self._server = server_class((host, port), Handler)
        except OSError as exc:
            raise InputError(f"http_host/http_port: cannot listen on {host}:{port}: "
                             f"{exc.strerror or exc}") from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="http",
                                        daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = str(self._server.server_address[0])
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/"

    def start(self) -> None:
        self._thread.start()
        log.info("HTTP endpoint on %s", self.url)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
