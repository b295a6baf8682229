"""Slow clients do not stop `mapapi serve`: a thousand connections that send
part of a request, a body a byte at a time, or nothing at all leave it
answering others at once, and are closed when their time-outs pass.

Real sockets against a real ``mapapi serve`` on 127.0.0.1, with its default
settings (the deadlines are checked with shorter ones, given as options).
"""

import resource
import socket
import time
from pathlib import Path

import pytest
import requests

from mapapi.server import LIMIT_OPTIONS, Limits

from .helpers import served_mapapi

ROOT = Path(__file__).resolve().parent.parent
LIMITS_DOC = ROOT / "docs" / "limits.md"
README = ROOT / "README.md"

SLOW_SOCKETS = 1000
#: What "answering" means under attack.
ANSWER_SECONDS = 1.0

SLOW_HEADERS = b"GET /healthz HTTP/1.1\r\nHost: attacker\r\nX-Slow: "
SLOW_BODY = (
    b"POST /api/v1/maps HTTP/1.1\r\nHost: attacker\r\nContent-Type: application/json\r\n"
    b'Content-Length: 100000\r\n\r\n{"title": "'
)
KEEP_ALIVE = b"GET /healthz HTTP/1.1\r\nHost: attacker\r\n\r\n"


@pytest.fixture
def enough_open_files():
    """Room for a thousand sockets in this process too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = SLOW_SOCKETS + 200
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"the open-files hard limit ({hard}) is below {needed}")
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def open_slow_connection(port: int, kind: int) -> socket.socket:
    """One of three kinds: headers never finished, a body never finished,
    an idle keep-alive connection after one answer."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall((SLOW_HEADERS, SLOW_BODY, KEEP_ALIVE)[kind])
    if kind == 2:
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    return sock


def is_open(sock: socket.socket) -> bool:
    """Whether the server still holds the connection (no end, no reset)."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def timed_get(url: str, **kwargs) -> tuple[int, float]:
    started = time.monotonic()
    response = requests.get(url, timeout=10, **kwargs)
    return response.status_code, time.monotonic() - started


def test_a_thousand_slow_connections_leave_the_service_answering(tmp_path, enough_open_files):
    with served_mapapi(tmp_path) as (server, key):
        # Slow headers last: they are the first to reach their time-out.
        kinds = sorted(i % 3 for i in range(SLOW_SOCKETS))
        sockets = [open_slow_connection(server.port, kind) for kind in reversed(kinds)]
        slow_headers = sockets[-kinds.count(0) :]
        try:
            timings = []
            for _ in range(5):
                for sock in slow_headers:
                    sock.send(b"a")  # headers keep coming, a byte at a time
                health = timed_get(server.base + "/healthz")
                read = timed_get(
                    server.base + "/api/v1/maps", headers={"Authorization": f"Bearer {key}"}
                )
                timings.append((health, read))
                time.sleep(0.2)
            held = sum(is_open(sock) for sock in sockets)
        finally:
            for sock in sockets:
                sock.close()
    assert held == SLOW_SOCKETS  # all of them at once, none refused or dropped
    for (health_status, health_seconds), (read_status, read_seconds) in timings:
        assert (health_status, read_status) == (200, 200)
        assert health_seconds < ANSWER_SECONDS and read_seconds < ANSWER_SECONDS, timings


def wait_closed(sockets, seconds: float) -> float:
    """Seconds until every socket was closed by the server; fails past ``seconds``."""
    started = time.monotonic()
    while any(is_open(sock) for sock in sockets):
        assert time.monotonic() - started < seconds, "connections still open"
        time.sleep(0.2)
    return time.monotonic() - started


def test_slow_headers_are_cut_off_at_the_header_time_out_however_steady(tmp_path):
    with served_mapapi(tmp_path, options=("--header-timeout", "2")) as (server, _key):
        sockets = [open_slow_connection(server.port, 0) for _ in range(20)]
        started = time.monotonic()
        while any(is_open(sock) for sock in sockets):
            assert time.monotonic() - started < 6, "headers dribbled past the header time-out"
            for sock in sockets:
                try:
                    sock.send(b"a")
                except OSError:
                    pass
            time.sleep(0.2)
        assert time.monotonic() - started > 1.5  # not before the time-out
        assert requests.get(server.base + "/healthz", timeout=5).status_code == 200


def test_idle_and_stalled_connections_close_at_the_idle_time_out(tmp_path):
    with served_mapapi(tmp_path, options=("--idle-timeout", "2")) as (server, _key):
        sockets = [open_slow_connection(server.port, kind) for kind in (1, 2) for _ in range(10)]
        waited = wait_closed(sockets, seconds=6)
        assert waited > 1.0, waited
        assert requests.get(server.base + "/healthz", timeout=5).status_code == 200


@pytest.mark.parametrize("name, variable", [(n, v) for n, v, _ in LIMIT_OPTIONS])
def test_each_serve_limit_is_documented_with_its_default(name, variable):
    default = f"{getattr(Limits, name):,}"
    rows = [row for row in LIMITS_DOC.read_text().splitlines() if f"`{variable}`" in row]
    assert len(rows) == 1 and f"| {default}" in rows[0], (variable, default, rows)
    assert f"| `{variable}` | `{getattr(Limits, name)}` |" in README.read_text()
