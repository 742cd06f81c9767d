"""Access rules of the HTTP endpoint: loopback only unless allowed, read-only pages."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from ipaddress import ip_network

import pytest

from infra import require
from slurm_defrag.errors import InputError
from slurm_defrag.service import settings
from slurm_defrag.service.http import (
    ControlServer,
    Query,
    Response,
    client_allowed,
    host_allowed,
)

TEN = ip_network("10.0.0.0/8")
V6 = ip_network("fd00::/8")


@pytest.mark.parametrize(
    ("address", "allow", "expected"),
    [
        ("127.0.0.1", (), True),
        ("127.3.4.5", (), True),  # all of 127/8 is loopback
        ("::1", (), True),
        ("::ffff:127.0.0.1", (), True),  # IPv4 client of a dual-stack socket
        ("10.1.2.3", (), False),
        ("192.168.1.10", (), False),
        ("::ffff:10.1.2.3", (), False),
        ("fd00::5", (), False),
        ("10.1.2.3", (TEN,), True),
        ("::ffff:10.1.2.3", (TEN,), True),
        ("11.0.0.1", (TEN,), False),
        ("fd00::5", (TEN, V6), True),
        ("fe80::1%eth0", (), False),  # zone id parsed, link-local is not loopback
        ("", (), False),
        ("not-an-address", (TEN,), False),
    ],
)
def test_client_allowed(address: str, allow: tuple[object, ...], expected: bool) -> None:
    assert client_allowed(address, allow) is expected  # type: ignore[arg-type]


def _page(_: Query) -> Response:
    return Response(200, b"<p>hello</p>", "text/html")


@pytest.fixture
def server() -> Iterator[tuple[str, list[int]]]:
    triggered: list[int] = []
    srv = ControlServer(
        "127.0.0.1", 0, lambda: triggered.append(1), lambda: (True, {"ok": True}), {"/page": _page}
    )
    srv.start()
    try:
        yield f"http://127.0.0.1:{srv.port}", triggered
    finally:
        srv.close()


def _call(url: str, method: str) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(
        url, method=method, data=b"x" if method in ("POST", "PUT", "PATCH") else None
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("path", ["/page", "/healthz"])
def test_pages_refuse_writes(server: tuple[str, list[int]], path: str, method: str) -> None:
    base, triggered = server
    code, _, headers = _call(base + path, method)
    assert code == 405
    assert headers["Allow"] == "GET, HEAD"
    assert not triggered


def test_get_head_trigger_and_unknown(server: tuple[str, list[int]]) -> None:
    base, triggered = server
    code, body, headers = _call(base + "/page", "GET")
    assert (code, body) == (200, b"<p>hello</p>")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    code, body, headers = _call(base + "/page", "HEAD")
    assert (code, body, headers["Content-Length"]) == (200, b"", "12")
    assert _call(base + "/trigger", "GET")[0] == 405  # a GET must never run a cycle
    assert _call(base + "/trigger", "GET")[2]["Allow"] == "POST"
    assert not triggered
    assert _call(base + "/trigger", "POST")[0] == 202
    assert triggered == [1]
    assert _call(base + "/nope", "GET")[0] == 404
    assert _call(base + "/nope", "DELETE")[0] == 404


def _non_loopback_address() -> str | None:
    """An address of this host that is not loopback, or None (no network)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for UDP connect
            address = str(s.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_non_local_clients_are_dropped_unless_allowed() -> None:
    """A real request from a non-loopback address: bind to it and connect from it. A
    refused client is disconnected before a handler thread starts, without an answer."""
    address = _non_loopback_address()
    require(address is not None, "a non-loopback IPv4 address on this host")
    assert address is not None
    triggered: list[int] = []
    for allow, allowed in (((), False), ((ip_network(f"{address}/32"),), True)):
        srv = ControlServer(
            address, 0, lambda: triggered.append(1), None, {"/page": _page}, allow=allow
        )
        srv.start()
        try:
            for path, method, served in (("/page", "GET", 200), ("/trigger", "POST", 202)):
                url = f"http://{address}:{srv.port}{path}"
                if allowed:
                    assert _call(url, method)[0] == served
                else:
                    with pytest.raises((urllib.error.URLError, ConnectionError)):
                        _call(url, method)
        finally:
            srv.close()
    assert triggered == [1]  # only the allowed client's trigger ran


def test_refused_clients_get_no_thread() -> None:
    srv = ControlServer(
        "127.0.0.1", 0, None, None, {"/page": _page}, allow=(ip_network("10.0.0.0/8"),)
    )
    srv.start()  # close() waits for the serving loop
    try:
        verify = srv._server.verify_request
        assert verify(None, ("127.0.0.1", 5000))
        assert verify(None, ("10.1.2.3", 5000))
        assert not verify(None, ("192.168.1.10", 5000))
        assert not verify(None, ("::ffff:192.168.1.10", 5000, 0, 0))
    finally:
        srv.close()


def test_idle_connections_are_closed() -> None:
    srv = ControlServer("127.0.0.1", 0, None, None, {"/page": _page})
    handler_class = srv._server.RequestHandlerClass
    assert handler_class.timeout == 10
    handler_class.timeout = 0.3  # type: ignore[assignment]  # this server's own class
    srv.start()
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            sock.sendall(b"GET /page HTTP/1.1\r\n")  # and then nothing more
            assert sock.recv(1024) == b""  # closed by the server, long before our 5 s
    finally:
        srv.close()


@pytest.mark.parametrize(
    ("host", "names", "expected"),
    [
        (None, (), True),  # no Host header: not a browser
        ("127.0.0.1:8787", (), True),
        ("10.1.2.3", (), True),
        ("[::1]:8787", (), True),
        ("localhost:8787", (), True),
        ("LocalHost.", (), True),
        ("ctl1:8787", ("ctl1",), True),
        ("CTL1.example.org", ("ctl1.example.org",), True),
        ("ctl1:8787", (), False),
        ("evil.example:8787", ("ctl1",), False),
        ("localhost.evil.example", (), False),
        ("", (), False),
        ("[::1", (), False),
    ],
)
def test_host_allowed(host: str | None, names: tuple[str, ...], expected: bool) -> None:
    assert host_allowed(host, names) is expected


def _status(base: str, path: str, method: str, **headers: str) -> int:
    req = urllib.request.Request(
        base + path, method=method, headers=headers, data=b"" if method == "POST" else None
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_dns_rebinding_and_cross_site_writes_get_403(server: tuple[str, list[int]]) -> None:
    base, triggered = server
    assert _status(base, "/page", "GET", Host="evil.example:80") == 403  # a rebound name
    assert _status(base, "/healthz", "GET", Host="evil.example") == 403
    assert _status(base, "/trigger", "POST", Host="evil.example") == 403
    assert _status(base, "/page", "GET", Host="localhost") == 200
    assert _status(base, "/page", "GET", Origin="http://127.0.0.1") == 200  # reads are fine
    assert _status(base, "/trigger", "POST", Origin="http://evil.example") == 403
    assert _status(base, "/trigger", "POST", Origin="null") == 403
    assert not triggered
    assert _status(base, "/trigger", "POST") == 202  # as the epilog's curl sends it
    assert triggered == [1]


def test_names_add_host_names() -> None:
    srv = ControlServer("127.0.0.1", 0, None, None, {"/page": _page}, names=["ctl1"])
    srv.start()
    try:
        base = f"http://127.0.0.1:{srv.port}"
        assert _status(base, "/page", "GET", Host="ctl1:8787") == 200
        assert _status(base, "/page", "GET", Host="ctl2:8787") == 403
    finally:
        srv.close()


def test_ipv6_loopback_is_served() -> None:
    require(socket.has_ipv6, "IPv6")
    try:
        srv = ControlServer("::1", 0, None, None, {"/page": _page})
    except InputError:
        require(False, "a bindable ::1")
        raise
    srv.start()
    try:
        assert srv.url == f"http://[::1]:{srv.port}/"
        assert _call(srv.url + "page", "GET")[0] == 200
        assert _call(srv.url + "trigger", "POST")[0] == 404  # no trigger given: no route
        assert _call(srv.url + "healthz", "GET")[0] == 404
    finally:
        srv.close()


def test_settings_web_and_http_allow(monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings.load()
    assert (s.web, s.http_allow) == (False, [])
    s = settings.load(web=True, http_allow=["10.0.0.0/8", "fd00::/8"])
    assert s.web
    assert s.http_allow == [TEN, V6]
    monkeypatch.setenv("SLURM_DEFRAG_HTTP_ALLOW", '["192.168.0.0/16"]')
    assert settings.load().http_allow == [ip_network("192.168.0.0/16")]
    with pytest.raises(InputError, match=r"http_allow\.0: value is not a valid"):
        settings.load(http_allow=["10.0.0.0/33"])
    assert settings.load(http_names=["slurmctl1"]).http_names == ["slurmctl1"]
    with pytest.raises(InputError, match="web: the web page needs the HTTP endpoint"):
        settings.load(web=True, http_port=0)
