"""Crash safety: a real ``mapapi serve`` killed mid-stream, or told to stop.

SIGKILL: while client threads stream single and bulk location creates, layer
creates and layer moves at the server, it is killed; restarted on the same
database it must hold every write the clients saw acknowledged, every bulk
wholly or not at all, and every map's layer orders exactly 0..n-1; and the
change feed must agree with the data: every acknowledged write has its
event, and replaying every event gives exactly the resources there are.

SIGTERM (and SIGINT): the server stops taking new connections, finishes the
requests in progress with their normal responses, then exits with status 0.

Both run on the suite's backend: a SQLite file, or (``MAPAPI_TEST_BACKEND=
postgres``) a fresh PostgreSQL database migrated with ``mapapi db upgrade``
and rate limits in Redis.
"""

import os
import random
import signal
import socket
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from sqlalchemy.engine import make_url

from . import backends
from .helpers import ServeProcess, checked, run_mapapi

API = "/api/v1"
STARTUP_SECONDS = 30
HTTP_TIMEOUT = (5, 30)
BULK_SIZE = 20
KILL_AFTER_SECONDS = 1.5
STREAM_SECONDS_MAX = 20  # no client thread runs longer, whatever happens
STOP_SECONDS = 15  # SIGTERM: the process must be gone by then


# --- a server in a subprocess ----------------------------------------------------


class Caller:
    """One key; a session per thread (requests' sessions are not thread-safe)."""

    def __init__(self, secret: str):
        self.secret = secret
        self.local = threading.local()

    def request(self, base: str, method: str, path: str, **kwargs) -> requests.Response:
        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = requests.Session()
            session.headers["Authorization"] = f"Bearer {self.secret}"
        return session.request(method, base + API + path, timeout=HTTP_TIMEOUT, **kwargs)

    def close(self) -> None:
        """Close this thread's session."""
        session = getattr(self.local, "session", None)
        if session is not None:
            session.close()
            self.local.session = None

    def fresh(self, base: str, method: str, path: str, **kwargs) -> requests.Response:
        """A request on a new connection of its own."""
        headers = {"Authorization": f"Bearer {self.secret}"}
        return requests.request(
            method, base + API + path, headers=headers, timeout=HTTP_TIMEOUT, **kwargs
        )

    def data(self, base: str, method: str, path: str, expected: int, **kwargs):
        response = self.request(base, method, path, **kwargs)
        assert response.status_code == expected, (method, path, response.status_code, response.text)
        return response.json()["data"]

    def list_all(self, base: str, path: str, plural: str, limit_pages: int = 1000) -> list:
        items = []
        for page in range(1, limit_pages + 1):
            data = self.data(base, "GET", f"{path}?page={page}&pageSize=100", 200)
            items.extend(data[plural])
            if page >= data["pagination"]["totalPages"]:
                return items
        raise AssertionError(f"{path}: more than {limit_pages} pages")


@pytest.fixture
def deployment(app_config, tmp_path):
    """A database of this test, commands' environment and an account's key.

    SQLite: the test's own file (new). PostgreSQL: a fresh database, dropped
    afterwards, so that ``serve`` finds the migrations it insists on.
    """
    instance = tmp_path / "instance"
    instance.mkdir()
    env = {name: value for name, value in os.environ.items() if not name.startswith("MAPAPI_")}
    database_url = app_config["SQLALCHEMY_DATABASE_URI"]
    on_postgres = make_url(database_url).get_backend_name() == "postgresql"
    if on_postgres:
        database_url = backends.create_postgres_database()
        # Buckets of this test only, in the suite's Redis.
        (instance / "config.py").write_text(
            f"RATELIMIT_KEY_PREFIX = {backends.unique_prefix()!r}\n"
        )
        env["MAPAPI_RATELIMIT_STORAGE_URI"] = app_config["RATELIMIT_STORAGE_URI"]
    env.update(
        MAPAPI_DATABASE_URL=database_url,
        MAPAPI_INSTANCE_PATH=str(instance),
        MAPAPI_BOOTSTRAP="0",
        MAPAPI_RATELIMIT_GENERAL="1000000 per hour",
        MAPAPI_RATELIMIT_MAP_CREATE="1000000 per hour",
        MAPAPI_RATELIMIT_BULK="1000000 per hour",
    )
    servers: list[ServeProcess] = []

    class Deployment:
        backend = "postgresql" if on_postgres else "sqlite"

        def start(self, name: str) -> ServeProcess:
            server = ServeProcess(env, tmp_path, name, threads=8)
            servers.append(server)
            server.wait_until_up(STARTUP_SECONDS)
            return server

    deployment = None
    try:
        checked(run_mapapi(env, tmp_path, "db", "upgrade"))
        checked(run_mapapi(env, tmp_path, "accounts", "create", "crash@example.com"))
        secret = checked(
            run_mapapi(env, tmp_path, "keys", "create", "crash@example.com", "--name", "crash")
        )
        deployment = Deployment()
        deployment.caller = Caller(secret.strip())
        yield deployment
    finally:
        if deployment is not None:
            deployment.caller.close()
        for server in servers:
            server.stop()
        if on_postgres:
            backends.drop_postgres_database(database_url)


def report(capsys, line: str) -> None:
    """A figure in the test output, with or without ``-s``."""
    with capsys.disabled():
        print(f"\n{line}")


# --- SIGKILL mid-stream -------------------------------------------------------------


def moved(order: list, layer_id: str, position: int) -> list:
    """A map's layer ids after moving ``layer_id`` to ``position`` (clamped to n-1)."""
    rest = [item for item in order if item != layer_id]
    rest.insert(min(position, len(order) - 1), layer_id)
    return rest


class Stream:
    """What the clients sent, and what the server acknowledged."""

    def __init__(self, caller: Caller, base: str, shared_maps: list, layers: dict, reorder: dict):
        self.caller = caller
        self.base = base
        self.shared_maps = shared_maps
        self.lock = threading.Lock()
        self.deadline = time.monotonic() + STREAM_SECONDS_MAX
        # acknowledged writes
        self.singles: dict[str, tuple[str, str]] = {}  # name -> (map id, location id)
        self.bulks: dict[str, tuple[str, list]] = {}  # bulk tag -> (map id, location ids)
        self.layers: dict[str, str] = dict(layers)  # layer id -> map id (setup's included)
        self.moves = 0
        # attempted (acknowledged or not)
        self.single_names: dict[str, str] = {}  # name -> map id
        self.bulk_tags: dict[str, str] = {}  # bulk tag -> map id
        # reorder maps: map id -> [acknowledged order, order if the pending move applied]
        self.reorder = {map_id: [list(order), None] for map_id, order in reorder.items()}
        self.bad_responses: list = []
        self.interrupted: list = []

    def send(self, method: str, path: str, expected: int, **kwargs):
        """The response's data when acknowledged; None when the server went away."""
        try:
            response = self.caller.request(self.base, method, path, **kwargs)
        except requests.RequestException as error:
            with self.lock:
                self.interrupted.append(f"{method} {path}: {error.__class__.__name__}")
            return None
        if response.status_code != expected:
            with self.lock:
                self.bad_responses.append((method, path, response.status_code, response.text[:300]))
            return None
        return response.json()["data"]

    def run(self, step, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(100_000):
                if time.monotonic() > self.deadline:
                    return
                if not step(rng):
                    return
        finally:
            self.caller.close()

    # Each step returns False once the server is gone (the thread then ends).

    def single(self, rng) -> bool:
        map_id = rng.choice(self.shared_maps)
        name = f"single:{uuid.uuid4().hex}"
        with self.lock:
            self.single_names[name] = map_id
        body = {"name": name, "lat": rng.uniform(-90, 90), "lng": rng.uniform(-180, 180)}
        data = self.send("POST", f"/maps/{map_id}/locations", 201, json=body)
        if data is None:
            return False
        with self.lock:
            self.singles[name] = (map_id, data["id"])
        return True

    def bulk(self, rng) -> bool:
        map_id = rng.choice(self.shared_maps)
        tag = uuid.uuid4().hex
        with self.lock:
            self.bulk_tags[tag] = map_id
        items = [
            {"name": f"bulk:{tag}:{index}", "lat": rng.uniform(-90, 90), "lng": rng.uniform(-180, 180)}
            for index in range(BULK_SIZE)
        ]
        data = self.send("POST", f"/maps/{map_id}/locations/bulk", 201, json={"locations": items})
        if data is None:
            return False
        if [item["name"] for item in data["created"]] != [item["name"] for item in items]:
            with self.lock:
                self.bad_responses.append(("bulk answered other items", map_id, data["count"]))
            return False
        with self.lock:
            self.bulks[tag] = (map_id, [item["id"] for item in data["created"]])
        return True

    def layer_create(self, rng) -> bool:
        map_id = rng.choice(self.shared_maps)
        body = {"name": f"layer {uuid.uuid4().hex[:8]}"}
        if rng.random() < 0.5:
            body["order"] = rng.randrange(0, 8)
        data = self.send("POST", f"/maps/{map_id}/layers", 201, json=body)
        if data is None:
            return False
        with self.lock:
            self.layers[data["id"]] = map_id
        return True

    def layer_move(self, rng) -> bool:
        with self.lock:
            layer_id, map_id = rng.choice(sorted(self.layers.items()))
        data = self.send(
            "PUT", f"/maps/{map_id}/layers/{layer_id}", 200, json={"order": rng.randrange(0, 10)}
        )
        if data is None:
            return False
        with self.lock:
            self.moves += 1
        return True

    def reorder_step(self, map_id):
        """Moves on a map no other thread touches: its order is known exactly."""

        def step(rng) -> bool:
            order, _ = self.reorder[map_id]
            layer_id = rng.choice(order)
            position = rng.randrange(0, len(order) + 2)
            pending = moved(order, layer_id, position)
            self.reorder[map_id][1] = pending
            data = self.send(
                "PUT", f"/maps/{map_id}/layers/{layer_id}", 200, json={"order": position}
            )
            if data is None:
                return False
            if data["order"] != pending.index(layer_id):
                with self.lock:
                    self.bad_responses.append(("reorder", map_id, data["order"], pending))
                return False
            self.reorder[map_id] = [pending, None]
            with self.lock:
                self.moves += 1
            return True

        return step


def test_sigkill_mid_stream_loses_no_acknowledged_write_and_no_bulk_is_partial(
    deployment, capsys
):
    caller = deployment.caller
    first = deployment.start("before-kill")
    base = first.base

    shared_maps, layers, reorder = [], {}, {}
    for number in range(3):
        map_id = caller.data(base, "POST", "/maps", 201, json={"title": f"Shared {number}"})["id"]
        shared_maps.append(map_id)
        for index in range(3):
            made = caller.data(base, "POST", f"/maps/{map_id}/layers", 201, json={"name": f"L{index}"})
            layers[made["id"]] = map_id
    for number in range(2):
        map_id = caller.data(base, "POST", "/maps", 201, json={"title": f"Reordered {number}"})["id"]
        reorder[map_id] = [
            caller.data(base, "POST", f"/maps/{map_id}/layers", 201, json={"name": f"R{index}"})["id"]
            for index in range(6)
        ]

    stream = Stream(caller, base, shared_maps, layers, reorder)
    steps = [stream.single, stream.single, stream.bulk, stream.bulk, stream.layer_create,
             stream.layer_move] + [stream.reorder_step(map_id) for map_id in reorder]
    threads = [
        threading.Thread(target=stream.run, args=(step, seed), daemon=True)
        for seed, step in enumerate(steps)
    ]
    try:
        for thread in threads:
            thread.start()
        time.sleep(KILL_AFTER_SECONDS)
        alive_at_kill = sum(thread.is_alive() for thread in threads)
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=10)
    finally:
        first.stop()
        for thread in threads:
            thread.join(timeout=STREAM_SECONDS_MAX + 40)
    assert not any(thread.is_alive() for thread in threads), "a client thread hung"
    assert first.process.returncode == -signal.SIGKILL

    # The stream was running when the server died, and it did real work.
    assert not stream.bad_responses, stream.bad_responses[:5]
    assert alive_at_kill == len(threads), "a client thread ended before the kill"
    assert len(stream.interrupted) == len(threads), stream.interrupted
    assert len(stream.singles) >= 5 and len(stream.bulks) >= 2, (
        f"too little was acknowledged before the kill: {len(stream.singles)} singles, "
        f"{len(stream.bulks)} bulks"
    )

    second = deployment.start("after-kill")
    base = second.base

    # Every acknowledged write is there, by id.
    acknowledged = [(f"/maps/{m}/locations/{i}", n) for n, (m, i) in stream.singles.items()]
    acknowledged += [
        (f"/maps/{m}/locations/{i}", f"bulk:{tag}:{index}")
        for tag, (m, ids) in stream.bulks.items()
        for index, i in enumerate(ids)
    ]
    acknowledged += [(f"/maps/{m}/layers/{i}", None) for i, m in stream.layers.items()]

    def fetch(item):
        path, name = item
        response = caller.request(base, "GET", path)
        if response.status_code != 200:
            return (path, response.status_code)
        if name is not None and response.json()["data"]["name"] != name:
            return (path, response.json()["data"]["name"])
        return None

    with ThreadPoolExecutor(max_workers=8) as pool:
        missing = [result for result in pool.map(fetch, acknowledged) if result is not None]
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"

    # Every bulk is whole or absent; nothing is there that nobody sent; no duplicates.
    bulks_whole = bulks_absent = 0
    for map_id in shared_maps:
        locations = caller.list_all(base, f"/maps/{map_id}/locations", "locations")
        singles, bulks, strangers = {}, {}, []
        for location in locations:
            kind, tag, *_ = location["name"].split(":") + [""]
            if kind == "single" and stream.single_names.get(location["name"]) == map_id:
                singles.setdefault(location["name"], []).append(location["id"])
            elif kind == "bulk" and stream.bulk_tags.get(tag) == map_id:
                bulks.setdefault(tag, []).append(location["id"])
            else:
                strangers.append(location["name"])
        assert not strangers, f"locations nobody sent: {strangers[:5]}"
        assert all(len(ids) == 1 for ids in singles.values()), "a single create stored twice"
        for tag, ids in bulks.items():
            assert len(ids) == BULK_SIZE, f"bulk {tag} is partial: {len(ids)} of {BULK_SIZE}"
            if tag in stream.bulks:
                assert ids == stream.bulks[tag][1]
        for tag, bulk_map in stream.bulk_tags.items():
            if bulk_map == map_id:
                if tag in bulks:
                    bulks_whole += 1
                else:
                    assert tag not in stream.bulks, f"acknowledged bulk {tag} is gone"
                    bulks_absent += 1

    # Layer orders are exactly 0..n-1 everywhere; the reordered maps are in an
    # order the client can explain: its last acknowledged one, or that with the
    # move in flight at the kill applied.
    for map_id in shared_maps + list(reorder):
        listed = caller.list_all(base, f"/maps/{map_id}/layers", "layers")
        assert [layer["order"] for layer in listed] == list(range(len(listed))), (
            map_id, [layer["order"] for layer in listed]
        )
        ids = [layer["id"] for layer in listed]
        if map_id in reorder:
            acknowledged_order, pending = stream.reorder[map_id]
            assert ids in (acknowledged_order, pending), (ids, acknowledged_order, pending)
        else:
            assert set(ids) >= {i for i, m in stream.layers.items() if m == map_id}

    events = check_feed_matches_data(caller, base, shared_maps + list(reorder), stream)

    writes = len(stream.singles) + len(stream.bulks) + len(stream.layers) + stream.moves
    report(
        capsys,
        f"crash ({deployment.backend}): SIGKILL after {KILL_AFTER_SECONDS} s; "
        f"{writes} writes acknowledged ({len(stream.singles)} locations, {len(stream.bulks)} bulks "
        f"of {BULK_SIZE}, {len(stream.layers)} layers, {stream.moves} layer moves), "
        f"{len(acknowledged)} acknowledged ids all present after restart; "
        f"bulks: {bulks_whole} whole, {bulks_absent} absent, 0 partial; "
        f"{len(stream.interrupted)} requests cut off by the kill; "
        f"{events} events, each with its change",
    )


def check_feed_matches_data(caller: Caller, base: str, map_ids: list, stream: Stream) -> int:
    """Every acknowledged write has its event, and the events replayed give
    exactly the resources the database holds, each as its GET shows it: no
    change without its event, no event without its change. How many events."""
    events, after = [], None
    while True:
        query = "?limit=100" + (f"&after={after}" if after else "")
        page = caller.data(base, "GET", f"/events{query}", 200)
        events.extend(page["events"])
        after = page["next"]
        if not page["hasMore"]:
            break
    replayed = {}
    for event in events:
        kind, action = event["type"].split(".")
        if action == "deleted":
            replayed.pop((kind, event["data"]["id"]), None)
        else:
            replayed[kind, event["data"]["id"]] = event["data"]
    present = {}
    for map_id in map_ids:
        present["map", map_id] = caller.data(base, "GET", f"/maps/{map_id}", 200)
        for plural, kind in (("locations", "location"), ("layers", "layer")):
            for item in caller.list_all(base, f"/maps/{map_id}/{plural}", plural):
                present[kind, item["id"]] = item
    assert replayed.keys() == present.keys(), (
        f"events without their change: {sorted(replayed.keys() - present.keys())[:5]}; "
        f"changes without their event: {sorted(present.keys() - replayed.keys())[:5]}"
    )
    stale = [key for key, body in present.items() if replayed[key] != body]
    assert not stale, f"the last event of {stale[:5]} is not the resource as it is"
    created = {event["data"]["id"] for event in events if event["type"] == "location.created"}
    acknowledged = {i for _, i in stream.singles.values()}
    acknowledged |= {i for _, ids in stream.bulks.values() for i in ids}
    assert acknowledged <= created
    return len(events)


# --- SIGTERM / SIGINT: finish what is in flight, then exit 0 ---------------------------


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_stop_signal_finishes_in_flight_requests_refuses_new_ones_and_exits_zero(
    deployment, capsys, signal_name
):
    caller = deployment.caller
    server = deployment.start(f"stop-{signal_name}")
    map_id = caller.data(server.base, "POST", "/maps", 201, json={"title": "Busy"})["id"]

    burst = 8  # as many as the server has threads: every one is being worked on
    items = [{"name": f"item {index}", "lat": 1.0, "lng": 2.0} for index in range(100)]
    barrier = threading.Barrier(burst + 1)
    first_done = threading.Event()
    outcomes: list = [None] * burst

    def bulk(index):
        barrier.wait(timeout=10)
        try:
            response = caller.fresh(
                server.base, "POST", f"/maps/{map_id}/locations/bulk", json={"locations": items}
            )
            outcomes[index] = (time.monotonic(), response.status_code, response.text[:300])
        except requests.RequestException as error:
            outcomes[index] = (time.monotonic(), None, repr(error))
        first_done.set()

    threads = [threading.Thread(target=bulk, args=(index,), daemon=True) for index in range(burst)]
    for thread in threads:
        thread.start()
    try:
        barrier.wait(timeout=10)
        # All eight are on the server: they were sent together, one has come back,
        # and the others wait for the map's lock behind each other.
        assert first_done.wait(timeout=30), "no bulk came back"
        signalled = time.monotonic()
        server.process.send_signal(getattr(signal, signal_name))
        time.sleep(0.1)
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
            refused = "a new connection was accepted after the signal"
        except ConnectionRefusedError:
            refused = True
        except OSError as error:
            refused = f"a new connection after the signal failed otherwise: {error!r}"
        try:
            exit_code = server.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            exit_code = f"still running after {STOP_SECONDS} s"
    finally:
        for thread in threads:
            thread.join(timeout=60)
        server.stop()
    assert not any(thread.is_alive() for thread in threads), "a request hung"

    in_flight = sum(1 for done, *_ in outcomes if done > signalled)
    assert in_flight >= 1, "every bulk finished before the signal: nothing was in flight"
    failed = [outcome[1:] for outcome in outcomes if outcome[1] != 201]
    assert not failed, f"in-flight requests cut off by {signal_name}: {failed}"
    assert exit_code == 0, (exit_code, server.stderr())
    assert refused is True, refused

    restarted = deployment.start(f"after-{signal_name}")
    stored = caller.data(restarted.base, "GET", f"/maps/{map_id}/locations?pageSize=1", 200)
    assert stored["pagination"]["total"] == burst * len(items)
    report(
        capsys,
        f"crash ({deployment.backend}): {signal_name} with {in_flight} of {burst} bulks in flight: "
        f"all answered 201, exit code {exit_code}",
    )
