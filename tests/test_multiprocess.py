"""Two ``mapapi serve`` processes over one PostgreSQL database and one Redis.

Everything a process keeps must live in the shared servers: data in
PostgreSQL, rate-limit buckets in Redis, so that a client sees one service
whichever process answers. Each test uses an account of its own, made with
the ``mapapi`` command, so that no test empties another's bucket.

Also: on an empty PostgreSQL database ``mapapi serve`` creates the schema,
once however many processes start; on one whose schema is out of date it
refuses to start and leaves the database alone.
"""

import os
import subprocess
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest
import requests
from sqlalchemy import create_engine, inspect, text

from . import backends
from .helpers import ServeProcess, checked, free_port, mapapi_program, run_mapapi

API = "/api/v1"
STARTUP_SECONDS = 20
FIRST_REVISION = "74b7cb5a2a07"  # the initial schema; later migrations follow it
HTTP_TIMEOUT = 15


def command_env(instance: Path, database_url: str, **extra) -> dict:
    """The environment of a ``mapapi`` command: no MAPAPI_* but ours."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("MAPAPI_")}
    env["MAPAPI_DATABASE_URL"] = database_url
    env["MAPAPI_INSTANCE_PATH"] = str(instance)
    env["MAPAPI_BOOTSTRAP"] = "0"
    env.update(extra)
    return env


def run_flask(env: dict, cwd: Path, *args) -> subprocess.CompletedProcess:
    """Flask-Migrate's development commands (``db current``, ``db downgrade``)."""
    flask = Path(mapapi_program()).with_name("flask")
    return subprocess.run(
        [str(flask), "--app", "mapapi", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )


def table_names(database_url: str) -> set[str]:
    engine = create_engine(database_url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


class Caller:
    """One account's key, speaking to either process."""

    def __init__(self, secret: str):
        self.secret = secret

    def request(self, server: ServeProcess, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.secret}"}
        return requests.request(
            method, server.base + API + path, headers=headers, timeout=HTTP_TIMEOUT, **kwargs
        )


class Cluster:
    def __init__(self, env: dict, workdir: Path, a: ServeProcess, b: ServeProcess):
        self.env = env
        self.workdir = workdir
        self.a = a
        self.b = b

    def new_caller(self, label: str) -> Caller:
        """A fresh pro account and one READ_WRITE key, made with the mapapi command."""
        email = f"{label}-{uuid.uuid4().hex[:8]}@example.com"
        checked(run_mapapi(self.env, self.workdir, "accounts", "create", email))
        secret = checked(run_mapapi(self.env, self.workdir, "keys", "create", email, "--name", "cli"))
        return Caller(secret.strip())


@pytest.fixture(scope="module")
def cluster(postgres_server, redis_url, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("multiprocess")
    instance = workdir / "instance"
    instance.mkdir()
    # A bucket prefix of this run only: other runs on the same Redis (and the
    # address buckets of 127.0.0.1) never meet ours.
    (instance / "config.py").write_text(f"RATELIMIT_KEY_PREFIX = {backends.unique_prefix()!r}\n")
    database_url = backends.create_postgres_database()
    servers = []
    try:
        env = command_env(
            instance,
            database_url,
            MAPAPI_RATELIMIT_STORAGE_URI=redis_url,
            MAPAPI_RATELIMIT_MAP_CREATE="3 per minute",
            MAPAPI_RATELIMIT_GENERAL="100000 per hour",
            MAPAPI_RATELIMIT_BULK="1000 per hour",
        )
        checked(run_mapapi(env, workdir, "db", "upgrade"))
        servers = [ServeProcess(env, workdir, "a"), ServeProcess(env, workdir, "b")]
        for server in servers:
            server.wait_until_up(STARTUP_SECONDS)
        yield Cluster(env, workdir, *servers)
    finally:
        for server in servers:
            server.stop()
        backends.drop_postgres_database(database_url)


def error_code(response: requests.Response) -> str:
    body = response.json()
    assert set(body) == {"error"}, body
    assert {"code", "message"} <= set(body["error"]) <= {"code", "message", "details"}, body
    return body["error"]["code"]


def run_together(calls) -> list[requests.Response]:
    """Run each of ``calls`` (no arguments) in its own thread, released at once."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def worker(index, call):
        barrier.wait(timeout=10)
        try:
            results[index] = call()
        except Exception as error:  # noqa: BLE001 - reported by the assertion below
            results[index] = error

    threads = [threading.Thread(target=worker, args=item) for item in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=HTTP_TIMEOUT + 15)
    assert not any(thread.is_alive() for thread in threads), "a request hung"
    failures = [r for r in results if not isinstance(r, requests.Response)]
    assert not failures, failures
    return results


# --- shared data ---------------------------------------------------------------


def test_map_created_through_one_process_is_read_through_the_other(cluster):
    caller = cluster.new_caller("maps")
    created = caller.request(cluster.a, "POST", "/maps", json={"title": "Shared atlas", "city": "Oslo"})
    assert created.status_code == 201, created.text
    made = created.json()["data"]

    read = caller.request(cluster.b, "GET", f"/maps/{made['id']}")
    assert read.status_code == 200, read.text
    assert read.json()["data"] == made

    listed = caller.request(cluster.b, "GET", "/maps")
    assert listed.status_code == 200, listed.text
    assert [m["id"] for m in listed.json()["data"]["maps"]] == [made["id"]]


def test_key_revoked_through_one_process_is_refused_by_the_other_at_once(cluster):
    caller = cluster.new_caller("revoke")
    made = caller.request(cluster.a, "POST", "/keys", json={"name": "doomed", "scope": "READ_WRITE"})
    assert made.status_code == 201, made.text
    doomed = Caller(made.json()["data"]["key"])
    doomed_id = made.json()["data"]["id"]
    # Process B has seen the key work (anything it might cache is warm).
    for _ in range(3):
        assert doomed.request(cluster.b, "GET", "/maps").status_code == 200

    revoked = caller.request(cluster.a, "DELETE", f"/keys/{doomed_id}")
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["data"]["status"] == "revoked"

    refused = doomed.request(cluster.b, "GET", "/maps")
    assert refused.status_code == 401, refused.text
    assert error_code(refused) == "INVALID_API_KEY"
    refused_write = doomed.request(cluster.b, "POST", "/maps", json={"title": "Too late"})
    assert refused_write.status_code == 401 and error_code(refused_write) == "INVALID_API_KEY"
    # The caller's other key still works there, and B no longer lists the revoked one.
    listed = caller.request(cluster.b, "GET", "/keys")
    assert listed.status_code == 200, listed.text
    assert doomed_id not in [k["id"] for k in listed.json()["data"]["keys"]]
    assert len(listed.json()["data"]["keys"]) == 1


# --- shared rate limits ----------------------------------------------------------


def test_map_creation_bucket_is_shared_by_both_processes(cluster):
    caller = cluster.new_caller("bucket")
    for number in range(2):
        made = caller.request(cluster.a, "POST", "/maps", json={"title": f"On A {number}"})
        assert made.status_code == 201, made.text

    third = caller.request(cluster.b, "POST", "/maps", json={"title": "On B"})
    assert third.status_code == 201, third.text
    assert third.headers["X-RateLimit-Remaining"] == "0"

    fourth = caller.request(cluster.b, "POST", "/maps", json={"title": "One too many"})
    assert fourth.status_code == 429, fourth.text
    assert error_code(fourth) == "RATE_LIMIT_EXCEEDED"
    assert fourth.headers["X-RateLimit-Limit"] == "3"
    assert fourth.headers["X-RateLimit-Remaining"] == "0"
    assert 1 <= int(fourth.headers["Retry-After"]) <= 60

    # Process A refuses as well: the bucket is one, wherever it is read.
    again_on_a = caller.request(cluster.a, "POST", "/maps", json={"title": "Still too many"})
    assert again_on_a.status_code == 429 and error_code(again_on_a) == "RATE_LIMIT_EXCEEDED"

    listed = caller.request(cluster.a, "GET", "/maps")
    assert listed.status_code == 200
    titles = [m["title"] for m in listed.json()["data"]["maps"]]
    assert titles == ["On A 0", "On A 1", "On B"]


# --- races across processes --------------------------------------------------------


def test_concurrent_key_creations_across_processes_leave_exactly_ten_active_keys(cluster):
    caller = cluster.new_caller("keys")  # holds one key already: 9 places left
    servers = [cluster.a, cluster.b]

    def create(number):
        body = {"name": f"race {number}", "scope": "READ_ONLY"}
        return lambda: caller.request(servers[number % 2], "POST", "/keys", json=body)

    responses = run_together([create(number) for number in range(15)])
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {201: 9, 409: 6}, [(r.status_code, r.text) for r in responses]
    assert all(error_code(r) == "CONFLICT" for r in responses if r.status_code == 409)

    for server in servers:
        listed = caller.request(server, "GET", "/keys?pageSize=100")
        assert listed.status_code == 200, listed.text
        keys = listed.json()["data"]["keys"]
        assert len(keys) == 10 and all(k["status"] == "active" for k in keys)
        created_ids = {r.json()["data"]["id"] for r in responses if r.status_code == 201}
        assert created_ids <= {k["id"] for k in keys}
    # Every secret handed out works, on either process.
    for number, response in enumerate(r for r in responses if r.status_code == 201):
        secret = response.json()["data"]["key"]
        assert Caller(secret).request(servers[number % 2], "GET", "/maps").status_code == 200


def test_concurrent_duplicate_tag_names_across_processes_give_exactly_one_tag(cluster):
    caller = cluster.new_caller("tags")
    made = caller.request(cluster.a, "POST", "/maps", json={"title": "Tagged"})
    assert made.status_code == 201, made.text
    map_id = made.json()["data"]["id"]
    servers = [cluster.a, cluster.b]

    def create(number):
        body = {"name": "  espresso  " if number % 3 else "espresso"}
        return lambda: caller.request(servers[number % 2], "POST", f"/maps/{map_id}/tags", json=body)

    responses = run_together([create(number) for number in range(20)])
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {201: 1, 409: 19}, [(r.status_code, r.text) for r in responses]
    assert all(error_code(r) == "CONFLICT" for r in responses if r.status_code == 409)
    (winner,) = [r.json()["data"] for r in responses if r.status_code == 201]

    for server in servers:
        listed = caller.request(server, "GET", f"/maps/{map_id}/tags")
        assert listed.status_code == 200, listed.text
        tags = listed.json()["data"]["tags"]
        assert [(t["id"], t["name"]) for t in tags] == [(winner["id"], "espresso")]


# --- serve on a new or a stale schema ------------------------------------------------


def prepare_empty(env, workdir, database_url):
    """A new database, nothing in it."""


def prepare_downgraded(env, workdir, database_url):
    """Migrated, then taken back to before the first migration: no table left but alembic's."""
    checked(run_mapapi(env, workdir, "db", "upgrade"))
    checked(run_flask(env, workdir, "db", "downgrade", "base"))


@pytest.mark.parametrize(
    "prepare", [prepare_empty, prepare_downgraded], ids=["empty", "downgraded-to-base"]
)
def test_serve_creates_the_schema_on_an_empty_postgres_database_once(
    postgres_server, tmp_path, prepare
):
    """docs/api.md: serve "creates the schema on an empty database". Two
    processes starting at the same moment: one creates it (and the first
    key), the other waits for it on the lock and finds it there."""
    database_url = backends.create_postgres_database()
    servers = []
    try:
        env = command_env(tmp_path / "instance", database_url, MAPAPI_BOOTSTRAP="1")
        prepare(env, tmp_path, database_url)
        servers = [ServeProcess(env, tmp_path, name) for name in ("first", "second")]
        for server in servers:
            server.wait_until_up()
        assert "Traceback" not in "".join(server.stderr() for server in servers)

        secrets = [line for server in servers for line in server.stdout().splitlines()]
        assert len(secrets) == 1, secrets  # the first key, printed once
        assert table_names(database_url) >= {"accounts", "api_keys", "maps", "locations"}
        current = checked(run_flask(env, tmp_path, "db", "current")).split()
        assert current == [*checked(run_flask(env, tmp_path, "db", "heads")).split()], current
        caller = Caller(secrets[0])
        for server in servers:
            assert caller.request(server, "GET", "/maps").status_code == 200
    finally:
        for server in servers:
            server.stop()
        backends.drop_postgres_database(database_url)


def prepare_behind(env, workdir, database_url):
    """At the first migration of several, with data in it."""
    checked(run_mapapi(env, workdir, "db", "upgrade", FIRST_REVISION))
    checked(run_mapapi(env, workdir, "accounts", "create", "keep@example.com"))


def prepare_without_history(env, workdir, database_url):
    """The models' tables (with an account) but no record of any migration."""
    from mapapi import create_app
    from mapapi.extensions import db

    app = create_app({"SQLALCHEMY_DATABASE_URI": database_url})
    with app.app_context():
        db.create_all()
        db.engine.dispose()
    checked(run_mapapi(env, workdir, "accounts", "create", "keep@example.com"))


@pytest.mark.parametrize(
    "prepare", [prepare_behind, prepare_without_history], ids=["behind", "no-migration-history"]
)
def test_serve_refuses_to_start_on_a_stale_postgres_schema_and_touches_nothing(
    postgres_server, tmp_path, prepare
):
    instance = tmp_path / "instance"
    database_url = backends.create_postgres_database()
    try:
        env = command_env(instance, database_url, MAPAPI_BOOTSTRAP="1")
        prepare(env, tmp_path, database_url)
        tables_before = table_names(database_url)
        rows_before = row_counts(database_url, tables_before)

        port = free_port()
        result = subprocess.run(
            [mapapi_program(), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )

        assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
        assert result.stdout == ""  # no bootstrap key either
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert "mapapi db upgrade" in lines[0]
        assert "Traceback" not in result.stderr
        assert table_names(database_url) == tables_before
        assert row_counts(database_url, tables_before) == rows_before
    finally:
        backends.drop_postgres_database(database_url)


def row_counts(database_url: str, tables: set[str]) -> dict[str, int]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            return {
                name: connection.execute(text(f'SELECT count(*) FROM "{name}"')).scalar_one()  # noqa: S608 - table names from our own metadata
                for name in sorted(tables)
            }
    finally:
        engine.dispose()
