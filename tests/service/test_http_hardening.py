"""Issue #15, HTTP endpoint: hostile clients on 127.0.0.1 (raw sockets, bounded loops).

Slow-header clients, connection floods, the server's own error pages, Unicode digits in
query parameters. Every socket here talks to 127.0.0.1 only and every loop has a bound.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from slurm_defrag.service.http import _SECURITY_HEADERS, ControlServer, Query, Response
from slurm_defrag.store.database import Store
from slurm_defrag.web.pages import web_pages
from slurm_defrag.web.sources import StoreSource


def _page(_: Query) -> Response:
    return Response(200, b"<p>hello</p>", "text/html")


def _start(**kwargs: object) -> ControlServer:
    srv = ControlServer(
        "127.0.0.1", 0, lambda: None, lambda: (True, {"ok": True}), {"/page": _page}, **kwargs
    )  # type: ignore[arg-type]
    srv.start()
    return srv


@pytest.fixture
def server() -> Iterator[ControlServer]:
    srv = _start()
    try:
        yield srv
    finally:
        srv.close()


def _raw(port: int, data: bytes, timeout: float = 5) -> bytes:
    """Send ``data``, read the whole answer until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
            if sum(map(len, chunks)) > 1_000_000:
                break
    return b"".join(chunks)


def _parse(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1."), answer[:200]
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def _assert_secured(headers: dict[str, str]) -> None:
    for name, value in _SECURITY_HEADERS.items():
        assert headers.get(name) == value, (name, headers)
    assert headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),  # not a request line
        (b"GET /page HTTP/9.x\r\n\r\n", 400),  # bad version: no status line was sent at all
        (b"GET /page\r\n\r\n", 400),  # HTTP/0.9: answers without any header
        (b"GET /page HTTP/2.0\r\n\r\n", 505),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.0\r\n\r\n", 414),
        (b"BREW /page HTTP/1.0\r\n\r\n", 501),
        (b"GET /page HTTP/1.0\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", 431),
        (b"GET /page HTTP/1.0\r\n" + b"X: y\r\n" * 150 + b"\r\n", 431),
    ],
)
def test_server_error_pages_carry_the_security_headers(
    server: ControlServer, request_bytes: bytes, status: int
) -> None:
    """Defect (#15): BaseHTTPRequestHandler.send_error answered 400/414/431/501/505 with
    its own HTML page, without CSP, nosniff, no-store (and for a request line it could not
    read, without a status line or any header)."""
    code, headers, body = _parse(_raw(server.port, request_bytes))
    assert code == status
    _assert_secured(headers)
    assert "error" in json.loads(body)
    assert headers["Server"].startswith("slurm-defrag")  # not the Python version


def test_normal_answers_still_carry_them(server: ControlServer) -> None:
    code, headers, body = _parse(_raw(server.port, b"GET /page HTTP/1.0\r\n\r\n"))
    assert (code, body) == (200, b"<p>hello</p>")
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_a_slow_header_client_is_cut_off() -> None:
    """Defect (#15): the handler's timeout bounds each wait for a byte, so a client sending
    one byte now and then (slowloris) held its thread for ever. The whole request must
    arrive within request_timeout_s."""
    srv = _start(request_timeout_s=0.5)
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            sock.sendall(b"GET /page HTTP/1.0\r\n")
            started = time.monotonic()
            closed_after = None
            for _ in range(40):  # at most 40 x 0.1 s, well under the per-byte timeout 10 s
                try:
                    sock.sendall(b"X")
                except OSError:  # reset by the server
                    closed_after = time.monotonic() - started
                    break
                sock.settimeout(0.1)
                try:
                    if sock.recv(1024) == b"":
                        closed_after = time.monotonic() - started
                        break
                except TimeoutError:
                    continue
                except OSError:
                    closed_after = time.monotonic() - started
                    break
        assert closed_after is not None, "still open after 4 s of trickling headers"
        assert closed_after < 2.0
    finally:
        srv.close()


def _hold(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /page HTTP/1.0\r\n")  # and nothing more: holds a handler thread
    return sock


def test_connections_beyond_the_cap_are_refused_at_once() -> None:
    """Defect (#15): every connection got its own thread, without a cap. Beyond
    max_connections a new one gets a canned 503 (with the security headers) and is
    closed in the accepting thread."""
    srv = _start(max_connections=2)
    held: list[socket.socket] = []
    try:
        held = [_hold(srv.port), _hold(srv.port)]
        time.sleep(0.2)  # both handler threads are waiting for the rest of their headers
        started = time.monotonic()
        code, headers, body = _parse(_raw(srv.port, b"GET /page HTTP/1.0\r\n\r\n", timeout=3))
        assert time.monotonic() - started < 1.0
        assert code == 503
        assert headers["Retry-After"] == "1"
        _assert_secured(headers)
        assert json.loads(body) == {"error": "busy: too many connections"}
        held.pop().close()  # a slot comes free once its handler notices
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            code = _parse(_raw(srv.port, b"GET /page HTTP/1.0\r\n\r\n"))[0]
            if code == 200:
                break
            time.sleep(0.05)
        assert code == 200
    finally:
        for sock in held:
            sock.close()
        srv.close()


def test_one_request_per_connection(server: ControlServer) -> None:
    """A keep-alive client cannot queue a second request (e.g. an unread body parsed as
    one) on the same thread."""
    two = b"GET /page HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /page HTTP/1.1\r\n\r\n"
    answer = _raw(server.port, two)
    assert answer.count(b"HTTP/1.") == 1


@pytest.mark.parametrize("limit", ["²", "٣", "0" * 5000 + "1", "1e3", " 5", "+5", "-1"])
def test_unicode_digits_in_limit_are_400(store: Store, limit: str) -> None:
    """Defect (#15): ``?limit=²`` passed str.isdigit() and int() raised: a 500. Every
    query number is now ASCII digits, bounded, or a 400 naming the parameter."""
    srv = ControlServer("127.0.0.1", 0, None, None, web_pages(StoreSource(store)))
    srv.start()
    try:
        url = f"http://127.0.0.1:{srv.port}/api/plans?" + urllib.parse.urlencode({"limit": limit})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url, timeout=5)
        assert err.value.code == 400
        assert json.loads(err.value.read())["error"].startswith("limit: ")
    finally:
        srv.close()


@pytest.mark.parametrize("since", ["٣d", "²d", "1" * 5000 + "d"])
def test_unicode_digits_in_since_are_400(store: Store, since: str) -> None:
    pages = web_pages(StoreSource(store))
    resp = pages["/api/history"]({"since": [since]})
    assert resp.status == 400
    assert "is not a duration" in json.loads(resp.body)["error"]
