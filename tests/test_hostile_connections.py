"""Hostile connections do not starve `mapapi serve`: answers nobody reads
hold no worker thread, and a body over 2 MiB is refused without being kept.

Real sockets against a real ``mapapi serve`` on 127.0.0.1 with its default
settings, but a shorter send time-out where the test waits for it.
"""

import json
import socket
import threading
import time

import pytest
import requests

from .helpers import served_mapapi

ANSWER_SECONDS = 1.0
UNREAD_CONNECTIONS = 16
#: The largest file of the reference page (Swagger UI's source map).
LARGEST_DOCS_FILE = "/docs/assets/swagger-ui-bundle.js.map"
MIB = 1024 * 1024


def pipeline_without_reading(port: int, request: bytes, count: int) -> socket.socket:
    """A connection that sends ``count`` requests at once and never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.settimeout(5)
    sock.sendall(request * count)
    return sock


def get_request(path: str, key: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return f"GET {path} HTTP/1.1\r\nHost: attacker\r\n{auth}\r\n".encode()


def timed_get(url: str, **kwargs) -> tuple[int, float]:
    started = time.monotonic()
    response = requests.get(url, timeout=10, **kwargs)
    return response.status_code, time.monotonic() - started


TCP_ESTABLISHED = 1


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed the connection, read without reading
    the answers waiting on it (Linux's TCP_INFO: the state leaves ESTABLISHED)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] != TCP_ESTABLISHED


def make_long_locations(base: str, key: str) -> str:
    """A map with 100 locations of 10,000-character descriptions; its id."""
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    created = session.post(f"{base}/api/v1/maps", json={"title": "long"}, timeout=10)
    map_id = created.json()["data"]["id"]
    locations = [
        {"name": f"place {i}", "lat": 1.0, "lng": 2.0, "description": "d" * 10_000}
        for i in range(100)
    ]
    bulk = session.post(
        f"{base}/api/v1/maps/{map_id}/locations/bulk", json={"locations": locations}, timeout=30
    )
    assert bulk.status_code == 201, bulk.text
    return map_id


@pytest.mark.parametrize("what", ["docs-file", "pages-of-long-locations"])
def test_answers_nobody_reads_hold_no_worker_and_are_cut_off_at_the_send_time_out(tmp_path, what):
    send_timeout = 4
    with served_mapapi(tmp_path, options=("--send-timeout", str(send_timeout))) as (server, key):
        if what == "docs-file":
            request = get_request(LARGEST_DOCS_FILE)
        else:
            map_id = make_long_locations(server.base, key)
            request = get_request(f"/api/v1/maps/{map_id}/locations?pageSize=100", key)
        sockets = [
            pipeline_without_reading(server.port, request, 200) for _ in range(UNREAD_CONNECTIONS)
        ]
        started = time.monotonic()
        try:
            timings = []
            while time.monotonic() - started < send_timeout - 1:
                timings.append(timed_get(server.base + "/healthz"))
                timings.append(
                    timed_get(
                        server.base + "/api/v1/maps", headers={"Authorization": f"Bearer {key}"}
                    )
                )
                time.sleep(0.2)
            assert not any(closed_by_server(sock) for sock in sockets)
            while not all(closed_by_server(sock) for sock in sockets):
                assert time.monotonic() - started < send_timeout + 4, "unread answers kept"
                time.sleep(0.25)
        finally:
            for sock in sockets:
                sock.close()
        assert timed_get(server.base + "/healthz")[0] == 200
    assert all(status == 200 for status, _ in timings), timings
    assert max(seconds for _, seconds in timings) < ANSWER_SECONDS, timings


def test_a_slow_but_steady_reader_is_not_cut_off(tmp_path):
    send_timeout = 3
    with served_mapapi(tmp_path, options=("--send-timeout", str(send_timeout))) as (server, _):
        expected = len(requests.get(server.base + LARGEST_DOCS_FILE, timeout=10).content)
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        sock.sendall(get_request(LARGEST_DOCS_FILE) * 3)
        received = 0
        started = time.monotonic()
        try:
            while received < 3 * expected:
                chunk = sock.recv(32 * 1024)
                assert chunk, f"cut off after {received} bytes"
                received += len(chunk)
                time.sleep(0.03)  # about 1 MiB/s: slower than the server writes
        finally:
            sock.close()
        assert time.monotonic() - started > send_timeout  # it did outlast the time-out
    assert received > 3 * expected  # three answers, with their headers


# -- bodies over the limit ------------------------------------------------------


def raw_exchange(port: int, head: bytes, body_chunks, read_after: bool = True):
    """Send ``head`` then the body pieces (stopping when the server closes);
    the bytes sent of the body, the answer read, and the seconds it all took."""
    started = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    answer = b""
    sent = 0
    try:
        sock.sendall(head)
        for chunk in body_chunks:
            try:
                sock.sendall(chunk)
            except OSError:  # closed by the server: it will take no more
                break
            sent += len(chunk)
            if time.monotonic() - started > 20:
                break
        try:
            while read_after:
                data = sock.recv(65536)
                if not data or b"\r\n\r\n" in answer + data and answer_complete(answer + data):
                    answer += data
                    break
                answer += data
        except OSError:
            pass
    finally:
        sock.close()
    return sent, answer, time.monotonic() - started


def answer_complete(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def status_and_error(answer: bytes) -> tuple[int, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)["error"]["code"]


def post_head(key: str | None, length: int | None, extra: str = "") -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    size = (
        f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    )
    return (
        "POST /api/v1/maps HTTP/1.1\r\nHost: client\r\nContent-Type: application/json\r\n"
        f"{auth}{size}{extra}\r\n"
    ).encode()


def plain(total: int, piece: int = 64 * 1024):
    sent = 0
    while sent < total:
        size = min(piece, total - sent)
        sent += size
        yield b" " * size


def chunked(total: int, piece: int = 64 * 1024):
    for data in plain(total, piece):
        yield b"%x\r\n%s\r\n" % (len(data), data)
    yield b"0\r\n\r\n"


@pytest.fixture(scope="module")
def body_server(tmp_path_factory):
    with served_mapapi(tmp_path_factory.mktemp("bodies")) as served:
        yield served


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_2_mib_by_mistake_gets_the_json_413(body_server, framing):
    server, key = body_server
    size = 3 * MIB
    if framing == "chunked":
        sent, answer, _ = raw_exchange(server.port, post_head(key, None), chunked(size))
    else:
        sent, answer, _ = raw_exchange(server.port, post_head(key, size), plain(size))
    assert sent >= size  # the whole body was taken (and dropped): the client reads the answer
    assert status_and_error(answer) == (413, "PAYLOAD_TOO_LARGE")


def test_the_connection_stays_usable_after_a_refused_body(body_server):
    server, key = body_server
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        sock.sendall(post_head(key, 3 * MIB) + b" " * (3 * MIB) + get_request("/healthz"))
        answers = b""
        while answers.count(b"HTTP/1.1 ") < 2 or not answers.endswith(b"}\n"):
            data = sock.recv(65536)
            assert data, answers
            answers += data
    finally:
        sock.close()
    first, second = answers.split(b"HTTP/1.1 ")[1:]
    assert first.startswith(b"413") and b"PAYLOAD_TOO_LARGE" in first
    assert second.startswith(b"200") and second.endswith(b'{"data":{"status":"ok"}}\n')


def test_a_body_without_a_key_is_refused_by_its_401_first(body_server):
    server, _ = body_server
    sent, answer, _ = raw_exchange(server.port, post_head(None, 3 * MIB), plain(3 * MIB))
    assert status_and_error(answer) == (401, "MISSING_API_KEY")


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_gigabyte_body_is_cut_off_after_a_few_mib(body_server, framing):
    """The service answers 413 and closes; the client, still sending, sees
    the answer or a reset. Either way it could send only a few MiB (what
    the service reads, plus the sockets' buffers)."""
    server, key = body_server
    size = 1024 * MIB
    if framing == "chunked":
        sent, answer, seconds = raw_exchange(server.port, post_head(key, None), chunked(size))
    else:
        sent, answer, seconds = raw_exchange(server.port, post_head(key, size), plain(size))
    assert sent < 32 * MIB, sent
    assert seconds < 10
    if answer:
        assert status_and_error(answer) == (413, "PAYLOAD_TOO_LARGE")
    assert requests.get(server.base + "/healthz", timeout=5).status_code == 200


def test_a_gigabyte_announced_with_expect_continue_is_refused_before_it_is_sent(body_server):
    server, key = body_server
    head = post_head(key, 1024 * MIB, "Expect: 100-continue\r\n")
    _, answer, seconds = raw_exchange(server.port, head, [])
    assert not answer.startswith(b"HTTP/1.1 100")
    assert status_and_error(answer) == (413, "PAYLOAD_TOO_LARGE")
    assert seconds < 2


def test_many_refused_bodies_at_once_leave_the_service_answering(body_server):
    server, key = body_server
    results = []

    def send_huge():
        results.append(raw_exchange(server.port, post_head(key, None), chunked(1024 * MIB)))

    threads = [threading.Thread(target=send_huge) for _ in range(16)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    status, seconds = timed_get(server.base + "/healthz")
    for thread in threads:
        thread.join(timeout=30)
    assert status == 200 and seconds < ANSWER_SECONDS
    assert len(results) == 16 and all(sent < 32 * MIB for sent, _, _ in results)
