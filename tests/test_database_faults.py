"""The database becoming unreachable, and coming back.

The app reaches PostgreSQL through a TCP forwarder of the test's own; stopping
the forwarder (its listener and every relayed connection) is the database
going away for the app, without touching the machine's shared server. The
app runs under a real waitress server, so a hung request would show as one.
"""

import socket
import threading
import time

import pytest
import requests
import waitress
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from mapapi import create_app
from mapapi.extensions import db

from . import backends
from .conftest import stop_server
from .factories import create_account, create_key
from .helpers import free_port

API = "/api/v1"
#: The contract's "within a few seconds": no request may take this long.
QUICK_SECONDS = 10
HTTP_TIMEOUT = 30


class Forwarder:
    """Relays 127.0.0.1:<port> to a target address; can be stopped and restarted."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.port = 0
        self._lock = threading.Lock()
        self._listener = None
        self._accepter = None
        self._stopping = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._pumps: list[threading.Thread] = []

    def start(self) -> None:
        """Listen (on the same port as before, after a stop) and relay."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._stopping = threading.Event()
        self._accepter = threading.Thread(
            target=self._accept_loop, args=(listener, self._stopping), daemon=True
        )
        self._accepter.start()

    def stop(self) -> None:
        """Close the listener and every relayed connection, then return."""
        self._stopping.set()
        if self._accepter is not None:
            self._accepter.join(timeout=5)
            assert not self._accepter.is_alive(), "the forwarder's accept loop did not stop"
            self._accepter = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets, self._sockets = self._sockets, set()
            pumps, self._pumps = self._pumps, []
        for sock in sockets:
            _close(sock)
        for pump in pumps:
            pump.join(timeout=5)
            assert not pump.is_alive(), "a relayed connection did not close"

    def _accept_loop(self, listener: socket.socket, stopping: threading.Event) -> None:
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(self.target, timeout=3)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if stopping.is_set():
                    _close(client)
                    _close(upstream)
                    return
                self._sockets.update((client, upstream))
                for source, sink in ((client, upstream), (upstream, client)):
                    pump = threading.Thread(target=_pump, args=(source, sink), daemon=True)
                    self._pumps.append(pump)
                    pump.start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def app_on(database_url: str):
    return create_app(
        {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": database_url,
            "RATELIMIT_STORAGE_URI": "memory://",
            "RATELIMIT_GENERAL": "100000 per hour",
            "RATELIMIT_MAP_CREATE": "100000 per hour",
            "RATELIMIT_BULK": "100000 per hour",
        }
    )


class Served:
    """An app under waitress (8 threads) on 127.0.0.1, and requests to it."""

    def __init__(self, app, secret: str | None = None):
        self.app = app
        self.secret = secret
        self.server = waitress.create_server(app, host="127.0.0.1", port=0, threads=8)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.effective_port}"

    def stop(self) -> None:
        stop_server(self.server, self.thread)
        with self.app.app_context():
            db.engine.dispose()

    def request(self, method: str, path: str, **kwargs) -> tuple[requests.Response, float]:
        """The response and how long it took, in seconds."""
        headers = {"Authorization": f"Bearer {self.secret}"} if self.secret else {}
        started = time.monotonic()
        response = requests.request(
            method, self.base + path, headers=headers, timeout=HTTP_TIMEOUT, **kwargs
        )
        return response, time.monotonic() - started


@pytest.fixture
def forwarded(postgres_server):
    """A fresh database with the schema, an app reaching it through a forwarder."""
    database_url = backends.create_postgres_database()
    server = make_url(backends.POSTGRES_SERVER_URL)
    forwarder = Forwarder((server.host or "127.0.0.1", server.port or 5432))
    served = None
    try:
        forwarder.start()
        app = app_on(
            make_url(database_url).set(host="127.0.0.1", port=forwarder.port)
            .render_as_string(hide_password=False)
        )
        with app.app_context():
            db.create_all()
        create_account(app, "owner@example.com")
        served = Served(app, create_key(app, "owner@example.com"))
        yield served, forwarder
    finally:
        if served is not None:
            served.stop()
        forwarder.stop()
        backends.drop_postgres_database(database_url)


def assert_unavailable(response: requests.Response, elapsed: float) -> None:
    assert response.status_code == 503, (response.status_code, response.text)
    assert elapsed < QUICK_SECONDS, f"took {elapsed:.1f} s"
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == "SERVICE_UNAVAILABLE"
    assert response.headers.get("X-Request-Id")


#: Requests that all need the database, each with its body.
DATABASE_REQUESTS = [
    ("GET", "/healthz", None),
    ("GET", API + "/maps", None),
    ("POST", API + "/maps", {"title": "During the outage"}),
    ("GET", API + "/keys", None),
]


def listed_titles(served: Served) -> list[str]:
    response, _ = served.request("GET", API + "/maps")
    assert response.status_code == 200, response.text
    return [m["title"] for m in response.json()["data"]["maps"]]


def wait_until_healthy(served: Served, seconds: float) -> float:
    """Poll /healthz until it says 200; how long that took."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        response, _ = served.request("GET", "/healthz")
        if response.status_code == 200:
            return time.monotonic() - started
        assert response.status_code == 503, (response.status_code, response.text)
        time.sleep(0.2)
    raise AssertionError(f"/healthz was not 200 again within {seconds} s")


def test_healthz_and_api_answer_through_a_reachable_database(forwarded):
    served, _ = forwarded
    health, _ = served.request("GET", "/healthz")
    assert health.status_code == 200
    assert health.json() == {"data": {"status": "ok"}}

    created, _ = served.request("POST", API + "/maps", json={"title": "Before"})
    assert created.status_code == 201, created.text
    assert listed_titles(served) == ["Before"]


def test_every_request_answers_503_quickly_while_the_database_is_unreachable(forwarded):
    served, forwarder = forwarded
    # Fill the pool with live connections first: they are the ones that die.
    warm = [served.request("GET", API + "/maps")[0].status_code for _ in range(4)]
    assert warm == [200] * 4

    forwarder.stop()
    for _round in range(2):
        for method, path, body in DATABASE_REQUESTS:
            response, elapsed = served.request(method, path, json=body)
            assert_unavailable(response, elapsed)


def test_concurrent_requests_during_an_outage_all_answer_503(forwarded):
    served, forwarder = forwarded
    assert listed_titles(served) == []
    forwarder.stop()

    results: list = [None] * 16

    def call(index):
        method, path, body = DATABASE_REQUESTS[index % len(DATABASE_REQUESTS)]
        try:
            results[index] = served.request(method, path, json=body)
        except Exception as error:  # noqa: BLE001 - reported below
            results[index] = error

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(results))]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=HTTP_TIMEOUT + 5)
    assert not any(thread.is_alive() for thread in threads), "a request hung"
    assert time.monotonic() - started < 2 * QUICK_SECONDS
    for result in results:
        assert isinstance(result, tuple), result
        response, _elapsed = result
        assert response.status_code == 503, (response.status_code, response.text)
        assert response.json()["error"]["code"] == "SERVICE_UNAVAILABLE"


def test_service_comes_back_by_itself_when_the_database_returns(forwarded):
    served, forwarder = forwarded
    created, _ = served.request("POST", API + "/maps", json={"title": "Before"})
    assert created.status_code == 201, created.text

    forwarder.stop()
    refused, elapsed = served.request("POST", API + "/maps", json={"title": "Lost"})
    assert_unavailable(refused, elapsed)
    assert_unavailable(*served.request("GET", "/healthz"))

    forwarder.start()
    wait_until_healthy(served, seconds=10)
    # Every pooled connection works again, not just the one /healthz got.
    for _ in range(10):
        assert listed_titles(served) == ["Before"]
    after, _ = served.request("POST", API + "/maps", json={"title": "After"})
    assert after.status_code == 201, after.text
    assert listed_titles(served) == ["Before", "After"]

    # And a second outage is survived the same way.
    forwarder.stop()
    assert_unavailable(*served.request("GET", API + "/maps"))
    forwarder.start()
    wait_until_healthy(served, seconds=10)
    assert listed_titles(served) == ["Before", "After"]


def test_connections_the_database_dropped_while_idle_are_replaced_without_an_error(forwarded):
    served, forwarder = forwarded
    # Several requests at once, so that the pool holds several connections.
    warm = [threading.Thread(target=served.request, args=("GET", API + "/maps")) for _ in range(8)]
    for thread in warm:
        thread.start()
    for thread in warm:
        thread.join(timeout=HTTP_TIMEOUT)

    # The database drops every connection (a restart) while none is in use.
    forwarder.stop()
    forwarder.start()

    for number in range(12):
        created, _ = served.request("POST", API + "/maps", json={"title": f"Map {number}"})
        assert created.status_code == 201, created.text
    health, _ = served.request("GET", "/healthz")
    assert health.status_code == 200
    assert listed_titles(served) == [f"Map {number}" for number in range(12)]


def test_a_database_port_nothing_listens_on_answers_503_quickly():
    pytest.importorskip("psycopg")
    closed = free_port()
    app = app_on(f"postgresql+psycopg://postgres@127.0.0.1:{closed}/mapapi_nowhere")
    served = Served(app, "mk_live_" + "x" * 43)
    try:
        for _round in range(2):
            for method, path, body in DATABASE_REQUESTS:
                response, elapsed = served.request(method, path, json=body)
                assert_unavailable(response, elapsed)
    finally:
        served.stop()


@pytest.fixture
def pooled(postgres_server):
    """The app's engine on a fresh database, and an engine that watches its sessions."""
    database_url = backends.create_postgres_database()
    app = app_on(database_url)
    watcher = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    try:
        with app.app_context():
            yield db.engine, watcher
            db.engine.dispose()
    finally:
        watcher.dispose()
        backends.drop_postgres_database(database_url)


def backend_pid(engine) -> int:
    """Check a connection out of ``engine``'s pool, note its server process, check it in."""
    with engine.connect() as connection:
        return connection.execute(text("SELECT pg_backend_pid()")).scalar_one()


def last_statement(watcher, pid: int):
    """What the server process ``pid`` ran last, and when its state last changed."""
    with watcher.connect() as connection:
        return connection.execute(
            text("SELECT query, state_change FROM pg_stat_activity WHERE pid = :pid"),
            {"pid": pid},
        ).one_or_none()


def test_a_pooled_connection_the_server_still_holds_is_used_without_a_round_trip(pooled):
    engine, watcher = pooled
    pid = backend_pid(engine)
    before = last_statement(watcher, pid)
    connection = engine.connect()  # the checkout, and its check, happen here
    try:
        assert last_statement(watcher, pid) == before  # nothing was sent to ask
        assert connection.execute(text("SELECT pg_backend_pid()")).scalar_one() == pid
    finally:
        connection.close()


def test_a_pooled_connection_whose_server_process_ended_is_replaced_before_use(pooled):
    engine, watcher = pooled
    pid = backend_pid(engine)
    with watcher.connect() as connection:
        assert connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()
    deadline = time.monotonic() + QUICK_SECONDS
    while last_statement(watcher, pid) is not None:
        assert time.monotonic() < deadline, "the server process did not end"
        time.sleep(0.05)
    assert backend_pid(engine) != pid  # a new connection, and no error
