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
* ``/trigger`` with a shared secret configured needs it in ``X-Defrag-Trigger-Secret``
  (403 otherwise, compared in constant time); triggers are coalesced (:mod:`.trigger`):
  202 when one schedules a cycle, 429 with ``Retry-After`` when one is already pending;
* one request per connection; its request line and headers must arrive within
  ``request_timeout_s`` in total (a client sending a byte now and then is cut off), and
  at most ``max_connections`` are served at once: beyond that a new connection gets a
  canned 503 and is closed in the accepting thread, so slow clients cannot pile up
  threads;
* every answer carries the security headers, the server's own error pages (400, 414,
  431, 501, ...) included, as JSON.
"""

from __future__ import annotations

import io
import json
import logging
import math
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Any
from urllib.parse import parse_qs, urlsplit

from slurm_defrag.errors import InputError
from slurm_defrag.service.trigger import SECRET_HEADER, Ticket, secret_matches

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

MAX_CONNECTIONS = 32
"""Connections served at once (each holds a thread); the page, /metrics and the epilog
need a handful."""
REQUEST_TIMEOUT_S = 10.0
"""Seconds a client has to send its whole request line and headers."""


def _canned(status: int, reason: str, body: bytes, extra: Mapping[str, str]) -> bytes:
    """A complete HTTP/1.0 answer with the security headers, for the accepting thread."""
    headers = {
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        "Connection": "close",
        **_SECURITY_HEADERS,
        **extra,
    }
    head = f"HTTP/1.0 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1") + b"\r\n" + body


_BUSY = _canned(
    503, "Service Unavailable", b'{"error": "busy: too many connections"}', {"Retry-After": "1"}
)


class _DeadlineReader(io.RawIOBase):
    """The request stream of one connection, cut off ``timeout_s`` after it was opened.

    The standard handler's ``timeout`` bounds each wait for a byte, not the request: a
    client sending one byte every few seconds (slowloris) would hold its thread for ever.
    Every read here waits at most for what is left of the whole request's time.
    """

    def __init__(self, sock: socket.socket, timeout_s: float, idle_s: float) -> None:
        self._sock = sock
        self._deadline = time.monotonic() + timeout_s
        self._idle_s = idle_s

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request not received in time")
        self._sock.settimeout(min(left, self._idle_s))
        return self._sock.recv_into(buffer)


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


class ListenError(InputError):
    """The address cannot be listened on (port in use, address not on this host). The
    message names the settings; a command that took them as options names those
    (:meth:`named`)."""

    def __init__(self, address: str, reason: str, names: str = "http_host/http_port") -> None:
        self.address, self.reason = address, reason
        super().__init__(f"{names}: cannot listen on {address}: {reason}")

    def named(self, names: str) -> ListenError:
        """The same error, naming where the address came from."""
        return ListenError(self.address, self.reason, names)


class _Server(ThreadingHTTPServer):
    allowed: tuple[Network, ...] = ()
    max_connections = MAX_CONNECTIONS
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)  # replaced per server
    routing: _Routing  # set right after construction, before the first request

    def verify_request(self, request: Any, client_address: Any) -> bool:
        # Runs in the accepting thread, before a handler thread is started.
        client = str(client_address[0])
        if client_allowed(client, self.allowed):
            return True
        log.info("http: dropped a connection from %s (not in http_allow)", client)
        return False

    def process_request(self, request: Any, client_address: Any) -> None:
        # In the accepting thread: a thread is started only while a slot is free.
        if not self.slots.acquire(blocking=False):
            log.warning(
                "http: refused a connection from %s: %d connections already served",
                client_address[0],
                self.max_connections,
            )
            try:
                request.setblocking(False)
                request.send(_BUSY)  # a few hundred bytes: fits any fresh send buffer
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Not the standard traceback on stderr: a client hanging up mid-answer is routine.
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            log.debug("http: connection from %s ended: %s", client_address[0], exc)
        else:
            log.exception("http: request from %s failed", client_address[0])

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    """One request per connection, checked and routed by the server's :class:`_Routing`."""

    timeout = 10  # seconds a client may stay silent before its connection is closed
    server_version = "slurm-defrag"  # not the Python version
    sys_version = ""

    @property
    def routing(self) -> _Routing:
        server = self.server
        assert isinstance(server, _Server)
        return server.routing

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the plain socket file; ours bounds the whole request
        self.rfile = io.BufferedReader(
            _DeadlineReader(self.connection, self.routing.request_timeout_s, float(self.timeout))
        )

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        # HTTP/0.9 answers have no status line and no headers: not served.
        if self.request_version == "HTTP/0.9":
            self.send_error(400, "HTTP/0.9 is not served")
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # The standard error page is HTML without our headers (and, for a request
        # line it could not read, without any header at all): JSON like the rest.
        log.debug(
            "http: %d %s for %r from %s",
            code,
            message or "",
            getattr(self, "requestline", "")[:200],
            self.client_address[0],
        )
        self.close_connection = True
        if self.request_version in ("HTTP/0.9", ""):
            self.request_version = "HTTP/1.0"
        short = self.responses.get(code, ("error", ""))[0]
        resp = Response.json({"error": message or short}, code)
        self._send(
            resp,
            body=getattr(self, "command", None) != "HEAD"
            and code >= 200
            and code not in (204, 304),
        )

    # do_GET, do_HEAD, ... are set below: every method goes through _handle, so the
    # header checks come first whatever the method (the address was checked by
    # the server before this thread started).
    def _handle(self, method: str) -> None:
        routing = self.routing
        if not host_allowed(self.headers.get("Host"), routing.host_names):
            self._forbid(method, f"Host {self.headers.get('Host')!r} is not this server")
            return
        if method in WRITE_METHODS and self.headers.get("Origin") is not None:
            self._forbid(method, f"cross-site write from {self.headers['Origin']!r}")
            return
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        if path == "/trigger" and routing.trigger is not None:
            self._handle_trigger(method, routing.trigger, routing.trigger_secret)
            return
        page = routing.routes.get(path)
        if page is None:
            self._send(Response.json({"error": "not found"}, 404))
        elif method not in READ_METHODS:
            self._refuse_method(READ_METHODS)
        else:
            self._send(self._render(page, url.path, url.query), body=method == "GET")

    def _handle_trigger(
        self, method: str, trigger: Callable[[], Ticket | None], secret: bytes | None
    ) -> None:
        if method != "POST":
            self._refuse_method(("POST",))
        elif secret is not None and not secret_matches(self.headers.get(SECRET_HEADER), secret):
            self._forbid(method, f"trigger without the right {SECRET_HEADER}")
        else:
            self._trigger(trigger())

    def _trigger(self, ticket: Ticket | None) -> None:
        if ticket is None or ticket.scheduled:
            delay = 0.0 if ticket is None else ticket.delay_s
            self._send(Response.json({"triggered": True, "in_s": round(delay, 3)}, 202))
            return
        # Folded into the cycle already pending: nothing new is scheduled.
        self._send(
            Response.json(
                {"triggered": False, "coalesced": True, "in_s": round(ticket.delay_s, 3)},
                429,
            ),
            extra={"Retry-After": str(max(1, math.ceil(ticket.delay_s)))},
        )

    @staticmethod
    def _render(page: Page, path: str, query: str) -> Response:
        try:
            return page(parse_qs(query))
        except Exception:  # a broken page must not kill the server thread
            log.exception("http: GET %s failed", path)
            return Response.json({"error": "internal error"}, 500)

    def _forbid(self, method: str, why: str) -> None:
        log.info(
            "http: refused %s %s from %s: %s",
            method,
            self.path,
            self.client_address[0],
            why,
        )
        self._send(Response.json({"error": "forbidden"}, 403))

    def _refuse_method(self, allowed_methods: tuple[str, ...]) -> None:
        self._send(
            Response.json({"error": "method not allowed"}, 405),
            extra={"Allow": ", ".join(allowed_methods)},
        )

    def _send(
        self, resp: Response, body: bool = True, extra: Mapping[str, str] | None = None
    ) -> None:
        self.close_connection = True  # one request per connection (see above)
        self.connection.settimeout(self.timeout)  # the answer gets its own time
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


for _method in (*READ_METHODS, *WRITE_METHODS):
    setattr(_Handler, f"do_{_method}", lambda self, m=_method: self._handle(m))


@dataclass(frozen=True, slots=True)
class _Routing:
    """What one :class:`ControlServer` serves; its handlers read it from their server."""

    routes: Mapping[str, Page]
    host_names: tuple[str, ...]
    trigger: Callable[[], Ticket | None] | None
    trigger_secret: bytes | None
    request_timeout_s: float


class ControlServer:
    """Serves the routes until :meth:`close`; ``port`` 0 picks a free port.

    ``trigger`` / ``health`` None leave ``/trigger`` / ``/healthz`` out (``slurm-defrag
    web`` has no cycle to trigger); ``trigger`` returns what became of the trigger (None:
    a cycle was scheduled). ``allow``: networks served besides loopback. ``names``: host
    names the server may be reached by besides IP addresses, ``localhost`` and ``host``.
    ``trigger_secret``: when given, ``POST /trigger`` needs it in ``X-Defrag-Trigger-Secret``.
    """

    def __init__(
        self,
        host: str,
        port: int,
        trigger: Callable[[], Ticket | None] | None,
        health: Callable[[], tuple[bool, dict[str, Any]]] | None,
        pages: Mapping[str, Page] | None = None,
        allow: Iterable[Network] = (),
        names: Iterable[str] = (),
        *,
        trigger_secret: bytes | None = None,
        max_connections: int = MAX_CONNECTIONS,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        routes: dict[str, Page] = dict(pages or {})
        host_names = (host, *names)

        if health is not None:

            def healthz(_: Query) -> Response:
                ok, body = health()
                return Response.json(body, 200 if ok else 503)

            routes["/healthz"] = healthz

        server_class = _Server6 if ":" in host else _Server
        try:
            self._server = server_class((host, port), _Handler)
        except OSError as exc:
            shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise ListenError(shown, str(exc.strerror or exc)) from None
        self._server.routing = _Routing(
            routes, host_names, trigger, trigger_secret, request_timeout_s
        )
        self._server.allowed = tuple(allow)
        self._server.max_connections = max_connections
        self._server.slots = threading.BoundedSemaphore(max_connections)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)

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
