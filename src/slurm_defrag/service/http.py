"""The service's local HTTP endpoint: ``POST /trigger``, ``GET /healthz`` and read-only pages.

The slurmctld epilog calls ``/trigger`` when a job ends, so freed GPUs are used at once
instead of at the next interval. Other features (Prometheus ``/metrics``, the web page)
add read-only ``GET`` routes through :class:`Response`-returning callables; this module
only routes, so each feature stays in its own module. Standard library only: a handful of
routes do not justify a web framework, and the server runs in daemon threads beside the
scheduler.

Access rules, the same for every route:

* only loopback clients (127.0.0.0/8, ::1) are served unless ``allow`` adds networks;
  others are disconnected without an answer before a handler thread starts, so a port
  scan or a flood from outside costs no thread;
* the ``Host`` header must name the server by an IP address, ``localhost``, the address
  it listens on or one of ``names`` (403 otherwise): a page of another site whose name
  was re-pointed at this host (DNS rebinding) cannot read anything;
* a write carrying an ``Origin`` header gets 403: browsers send one with every
  cross-site ``POST``, the epilog's curl never does;
* pages answer ``GET`` and ``HEAD`` only (other methods: 405), ``/trigger`` only ``POST``;
* a connection idle for ``Handler.timeout`` seconds is closed.
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


def host_allowed(host_header: str | None, names: Iterable[str] = ()) -> bool:
    """True if a ``Host`` header names this server by an IP address, ``localhost`` or one
    of ``names``; a request without one is served (only browsers matter here, and they
    always send it)."""
    if host_header is None:
        return True
    try:
        hostname = urlsplit(f"//{host_header}").hostname  # drops the port and [] of IPv6
    except ValueError:
        return False
    if not hostname:
        return False
    hostname = hostname.rstrip(".")
    try:
        ip_address(hostname)
        return True
    except ValueError:
        pass
    return hostname in ("localhost", *(n.lower().rstrip(".") for n in names))


class _Server(ThreadingHTTPServer):
    allowed: tuple[Network, ...] = ()

    def verify_request(self, request: Any, client_address: Any) -> bool:
        # Runs in the accepting thread, before a handler thread is started.
        client = str(client_address[0])
        if client_allowed(client, self.allowed):
            return True
        log.info("http: dropped a connection from %s (not in http_allow)", client)
        return False


class _Server6(_Server):
    address_family = socket.AF_INET6


class ControlServer:
    """Serves the routes until :meth:`close`; ``port`` 0 picks a free port.

    ``trigger`` / ``health`` None leave ``/trigger`` / ``/healthz`` out (``slurm-defrag
    web`` has no cycle to trigger). ``allow``: networks served besides loopback.
    ``names``: host names the server may be reached by besides IP addresses,
    ``localhost`` and ``host``.
    """

    def __init__(self, host: str, port: int, trigger: Callable[[], None] | None,
                 health: Callable[[], tuple[bool, dict[str, Any]]] | None,
                 pages: Mapping[str, Page] | None = None,
                 allow: Iterable[Network] = (), names: Iterable[str] = ()) -> None:
        routes: dict[str, Page] = dict(pages or {})
        host_names = (host, *names)

        if health is not None:
            def healthz(_: Query) -> Response:
                ok, body = health()
                return Response.json(body, 200 if ok else 503)

            routes["/healthz"] = healthz

        class Handler(BaseHTTPRequestHandler):
            timeout = 10  # seconds a client may stay silent before its connection is closed

            # do_GET, do_HEAD, ... are set below: every method goes through _handle, so the
            # header checks come first whatever the method (the address was checked by
            # the server before this thread started).
            def _handle(self, method: str) -> None:
                if not host_allowed(self.headers.get("Host"), host_names):
                    self._forbid(method, f"Host {self.headers.get('Host')!r} is not this server")
                    return
                if method in WRITE_METHODS and self.headers.get("Origin") is not None:
                    self._forbid(method, f"cross-site write from {self.headers['Origin']!r}")
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

            def _forbid(self, method: str, why: str) -> None:
                log.info("http: refused %s %s from %s: %s", method, self.path,
                         self.client_address[0], why)
                self._send(Response.json({"error": "forbidden"}, 403))

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

        server_class = _Server6 if ":" in host else _Server
        try:
            self._server = server_class((host, port), Handler)
        except OSError as exc:
            raise InputError(f"http_host/http_port: cannot listen on {host}:{port}: "
                             f"{exc.strerror or exc}") from None
        self._server.allowed = tuple(allow)
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
