"""Idempotency-Key on POST: a retried request runs once, across threads,
processes, restarts and a process killed mid-request."""

import os
import signal
import subprocess
import threading
import time
import uuid
from datetime import timedelta

import pytest
import requests
from sqlalchemy import create_engine, func, select, text, update

from mapapi.extensions import db
from mapapi.storage.models import ApiKey, IdempotencyRecord, Location, Map
from mapapi.timeutil import utcnow

from . import backends
from .factories import ApiClient, create_key, error_code, make_map
from .helpers import ServeProcess, data_of, mapapi_program

TIMEOUT = 20


def keyed(key: str) -> dict:
    return {"Idempotency-Key": key}


def count(app, model) -> int:
    with app.app_context():
        return db.session.scalar(select(func.count()).select_from(model))


def records(app) -> list:
    with app.app_context():
        return db.session.execute(select(IdempotencyRecord.__table__)).all()


# --- replay, reuse, scope -----------------------------------------------------------


def test_a_retry_with_the_same_key_and_body_replays_the_first_answer(app, api):
    first = api.post(
        "/maps", json={"title": "Atlas", "city": "Oslo"}, headers=keyed("k-1")
    )
    made = data_of(first, 201)
    assert "Idempotent-Replayed" not in first.headers
    # The same JSON value, written otherwise: keys reordered, other spacing and escapes.
    again = api.post(
        "/maps",
        data='{ "city" : "Osl\\u006f",\n "title": "Atlas" }',
        content_type="application/json",
        headers=keyed("k-1"),
    )
    assert again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.get_data() == first.get_data()
    assert again.headers["ETag"] == first.headers["ETag"]
    assert again.headers["Cache-Control"] == "no-store"
    assert count(app, Map) == 1
    assert data_of(api.get(f"/maps/{made['id']}")) == made


def test_a_replay_counts_against_the_general_bucket_only(app_config, key_factory):
    api = key_factory(
        {"RATELIMIT_MAP_CREATE": "2 per hour", "RATELIMIT_GENERAL": "100 per hour"}
    )
    assert (
        api.post("/maps", json={"title": "A"}, headers=keyed("once")).status_code == 201
    )
    for expected_remaining in (98, 97, 96):
        replay = api.post("/maps", json={"title": "A"}, headers=keyed("once"))
        assert (
            replay.status_code == 201
            and replay.headers["Idempotent-Replayed"] == "true"
        )
        assert replay.headers["X-RateLimit-Limit"] == "100"
        assert replay.headers["X-RateLimit-Remaining"] == str(expected_remaining)
    # The map-creation bucket still has its second request.
    assert api.post("/maps", json={"title": "B"}).status_code == 201
    refused = api.post("/maps", json={"title": "C"})
    assert refused.status_code == 429 and error_code(refused) == "RATE_LIMIT_EXCEEDED"
    # A replay is still answered: check 5 comes before the map-creation bucket.
    assert (
        api.post("/maps", json={"title": "A"}, headers=keyed("once")).status_code == 201
    )


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/maps", {"title": "Other"}),
        ("/maps", {"title": "Atlas", "public": False}),
        ("/keys", {"title": "Atlas"}),
    ],
)
def test_the_same_key_with_another_path_or_body_is_refused(app, api, path, body):
    assert (
        api.post("/maps", json={"title": "Atlas"}, headers=keyed("k")).status_code
        == 201
    )
    reused = api.post(path, json=body, headers=keyed("k"))
    assert reused.status_code == 422
    assert reused.get_json() == {
        "error": {
            "code": "IDEMPOTENCY_KEY_REUSED",
            "message": reused.get_json()["error"]["message"],
        }
    }
    assert count(app, Map) == 1


def test_a_number_written_as_another_json_value_is_another_body(app, api):
    assert (
        api.post(
            "/maps", json={"title": "A", "zoom": 3}, headers=keyed("z")
        ).status_code
        == 201
    )
    assert (
        api.post(
            "/maps", json={"title": "A", "zoom": 3.0}, headers=keyed("z")
        ).status_code
        == 422
    )


def test_keys_belong_to_the_account(app, api, other_api):
    assert (
        api.post("/maps", json={"title": "Mine"}, headers=keyed("shared")).status_code
        == 201
    )
    theirs = other_api.post("/maps", json={"title": "Theirs"}, headers=keyed("shared"))
    assert theirs.status_code == 201 and "Idempotent-Replayed" not in theirs.headers
    assert data_of(theirs, 201)["title"] == "Theirs"
    assert count(app, Map) == 2


def refused_then_fixed(api, key: str, refused: dict, fixed: dict, status: int) -> dict:
    """``refused`` (a request's keyword arguments) answers ``status``; the same
    key then runs ``fixed``, whose answer a third request replays."""
    first = api.post(headers=keyed(key), **refused)
    assert first.status_code == status, first.get_json()
    ran = api.post(headers=keyed(key), **fixed)
    assert ran.status_code in (200, 201), ran.get_json()
    assert "Idempotent-Replayed" not in ran.headers
    again = api.post(headers=keyed(key), **fixed)
    assert again.headers["Idempotent-Replayed"] == "true" and again.data == ran.data
    return ran.get_json()["data"]


def test_a_validation_error_of_the_body_keeps_nothing(app, api):
    refused = {"path": "/maps", "json": {"title": ""}}
    made = refused_then_fixed(api, "bad", refused, {"path": "/maps", "json": {"title": "A"}}, 400)
    assert made["title"] == "A" and count(app, Map) == 1


def test_a_wrong_content_type_keeps_nothing(app, api):
    body = '{"title": "Atlas"}'
    refused = {"path": "/maps", "data": body, "content_type": "text/plain"}
    fixed = {"path": "/maps", "data": body, "content_type": "application/json"}
    assert refused_then_fixed(api, "ct", refused, fixed, 400)["title"] == "Atlas"
    assert count(app, Map) == 1


def test_a_validation_error_of_the_query_keeps_nothing(app, api):
    map_id = make_map(api)["id"]
    collection = {
        "type": "FeatureCollection",
        "features": [
            {"type": "Feature", "geometry": {"type": "Point", "coordinates": [2, 1]},
             "properties": {"title": "Here"}},
        ],
    }  # fmt: skip
    path = f"/maps/{map_id}/locations/import"
    refused = {"path": f"{path}?nameProperty=", "json": collection}
    fixed = {"path": f"{path}?nameProperty=title", "json": collection}
    # The query differs, so the fixed request is another request: it runs
    # because the refused one kept nothing. Fixed in the body alone:
    assert refused_then_fixed(api, "q", refused, fixed, 400)["count"] == 1
    bad_body = {"path": f"{path}?nameProperty=title", "json": {**collection, "features": []}}
    assert refused_then_fixed(api, "q2", bad_body, fixed, 400)["count"] == 1
    assert count(app, Location) == 2


def test_a_body_too_large_keeps_nothing(app, api):
    too_large = {"path": "/maps", "json": {"title": "A", "description": "x" * (2 * 1024 * 1024)}}
    refused_then_fixed(api, "big", too_large, {"path": "/maps", "json": {"title": "A"}}, 413)
    assert count(app, Map) == 1


def test_a_403_keeps_nothing_for_the_accounts_other_keys(app, client, api):
    read_only = ApiClient(client, create_key(app, "owner@example.com", scope="READ_ONLY"))
    refused = read_only.post("/maps", json={"title": "A"}, headers=keyed("scope"))
    assert refused.status_code == 403
    ran = api.post("/maps", json={"title": "A"}, headers=keyed("scope"))
    assert ran.status_code == 201 and "Idempotent-Replayed" not in ran.headers


def test_a_conflict_the_data_gave_is_kept_and_replayed(app, api):
    map_id = make_map(api)["id"]
    api.post(f"/maps/{map_id}/tags", json={"name": "taken"})
    conflict = api.post(f"/maps/{map_id}/tags", json={"name": "taken"}, headers=keyed("dup"))
    assert conflict.status_code == 409 and error_code(conflict) == "CONFLICT"
    api.delete(f"/maps/{map_id}/tags/{data_of(api.get(f'/maps/{map_id}/tags'))['tags'][0]['id']}")
    again = api.post(f"/maps/{map_id}/tags", json={"name": "taken"}, headers=keyed("dup"))
    assert again.status_code == 409 and again.headers["Idempotent-Replayed"] == "true"
    assert again.data == conflict.data


def test_the_query_is_part_of_the_comparison(app, api):
    map_id = make_map(api)["id"]
    feature = {"type": "Feature", "geometry": {"type": "Point", "coordinates": [2, 1]},
               "properties": {"title": "Here", "externalId": "e1"}}  # fmt: skip
    collection = {"type": "FeatureCollection", "features": [feature]}
    path = f"/maps/{map_id}/locations/import"
    plain = api.post(f"{path}?nameProperty=title", json=collection, headers=keyed("imp"))
    assert plain.status_code == 201
    upserting = api.post(
        f"{path}?nameProperty=title&upsert=true", json=collection, headers=keyed("imp")
    )
    assert upserting.status_code == 422 and error_code(upserting) == "IDEMPOTENCY_KEY_REUSED"
    # The same parameters and values in another order are the same query.
    first = api.post(f"{path}?upsert=true&nameProperty=title", json=collection,
                     headers=keyed("ups"))  # fmt: skip
    assert first.status_code == 200 and "Idempotent-Replayed" not in first.headers
    again = api.post(f"{path}?nameProperty=title&upsert=true", json=collection,
                     headers=keyed("ups"))  # fmt: skip
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.data == first.data
    other_value = api.post(f"{path}?nameProperty=title&upsert=1", json=collection,
                           headers=keyed("ups"))  # fmt: skip
    assert other_value.status_code == 422
    assert count(app, Location) == 1


def test_a_kept_404_of_an_unknown_map_is_replayed(app, api):
    path = "/maps/" + "A" * 22 + "/locations"
    body = {"name": "x", "lat": 1, "lng": 2}
    assert error_code(api.post(path, json=body, headers=keyed("nf"))) == "NOT_FOUND"
    again = api.post(path, json=body, headers=keyed("nf"))
    assert again.status_code == 404 and again.headers["Idempotent-Replayed"] == "true"


def test_a_replayed_key_creation_answers_the_record_without_the_secret(app, api):
    body = {"name": "robot", "scope": "READ_ONLY"}
    first = data_of(api.post("/keys", json=body, headers=keyed("new-key")), 201)
    assert first["key"].startswith("mk_live_")
    replay = api.post("/keys", json=body, headers=keyed("new-key"))
    assert replay.status_code == 201 and replay.headers["Idempotent-Replayed"] == "true"
    kept = data_of(replay, 201)
    assert "key" not in kept
    assert kept == {name: value for name, value in first.items() if name != "key"}
    assert count(app, ApiKey) == 2
    (row,) = records(app)
    assert first["key"] not in row.body and first["key"][8:] not in row.body


@pytest.mark.parametrize(
    "value", ["", "a" * 256, "caf\u00e9", "two words", "tab\there"]
)
def test_a_malformed_key_is_a_validation_error(app, api, value):
    response = api.post(
        "/maps", json={"title": "A"}, headers={"Idempotency-Key": value}
    )
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "VALIDATION_ERROR"
    assert list(response.get_json()["error"]["details"]) == ["Idempotency-Key"]
    assert count(app, Map) == 0 and records(app) == []


def test_the_longest_and_oddest_keys_are_accepted(app, api):
    for value in ("x" * 255, "!~\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}"):
        assert (
            api.post("/maps", json={"title": "A"}, headers=keyed(value)).status_code
            == 201
        )
        replay = api.post("/maps", json={"title": "A"}, headers=keyed(value))
        assert replay.headers["Idempotent-Replayed"] == "true"
    assert count(app, Map) == 2


def test_other_methods_ignore_the_header(app, api):
    made = make_map(api)
    for _ in range(2):
        response = api.put(
            f"/maps/{made['id']}", json={"title": "B"}, headers=keyed("p")
        )
        assert (
            response.status_code == 200
            and "Idempotent-Replayed" not in response.headers
        )
    assert records(app) == []


def test_checks_1_to_4_answer_before_the_key_is_looked_at(app, api, client):
    assert api.post("/maps", json={"title": "A"}, headers=keyed("k")).status_code == 201
    no_key = client.post("/api/v1/maps", json={"title": "A"}, headers=keyed("k"))
    assert no_key.status_code == 401
    assert (
        api.post("/nowhere", json={"title": "A"}, headers=keyed("k")).status_code == 404
    )
    assert api.post("/maps/" + "A" * 22, json={}, headers=keyed("k")).status_code == 405


# --- in progress, a dead process's key, the time a key is kept -----------------------


def _set_row(app, **values) -> None:
    with app.app_context():
        db.session.execute(update(IdempotencyRecord).values(**values))
        db.session.commit()


def test_a_key_whose_request_runs_answers_409_and_a_dead_ones_is_taken_over(app, api):
    body = {"title": "A"}
    assert api.post("/maps", json=body, headers=keyed("run")).status_code == 201
    # As a request that is still running would leave it: reserved, no answer.
    _set_row(app, status=None, body=None, started_at=utcnow())
    busy = api.post("/maps", json=body, headers=keyed("run"))
    assert busy.status_code == 409 and error_code(busy) == "IDEMPOTENCY_KEY_IN_USE"
    assert busy.headers["Retry-After"] == "1"
    # Another body is still another request, running or not.
    assert (
        api.post("/maps", json={"title": "B"}, headers=keyed("run")).status_code == 422
    )
    # Its process died: past the lease (30 s by default) the key runs afresh.
    _set_row(app, started_at=utcnow() - timedelta(seconds=31))
    fresh = api.post("/maps", json=body, headers=keyed("run"))
    assert fresh.status_code == 201 and "Idempotent-Replayed" not in fresh.headers
    replay = api.post("/maps", json=body, headers=keyed("run"))
    assert replay.get_data() == fresh.get_data()


def test_a_key_past_its_time_is_new_again_and_old_rows_are_swept(app, api):
    assert (
        api.post("/maps", json={"title": "A"}, headers=keyed("old")).status_code == 201
    )
    assert (
        api.post("/maps", json={"title": "A"}, headers=keyed("older")).status_code
        == 201
    )
    _set_row(app, expires_at=utcnow() - timedelta(seconds=1))
    # Expired: the same key now serves another request.
    assert (
        api.post("/maps", json={"title": "B"}, headers=keyed("old")).status_code == 201
    )
    with app.app_context():
        app.extensions["mapapi.idempotency.sweeper"]._next = 0  # the minute has passed
    assert (
        api.post("/maps", json={"title": "C"}, headers=keyed("new")).status_code == 201
    )
    assert sorted(row.key for row in records(app)) == ["new", "old"]


def test_the_time_a_key_is_kept_is_configurable(app_config):
    from mapapi import create_app

    app_config["IDEMPOTENCY_TTL_HOURS"] = "2"
    app = create_app(app_config)
    assert app.extensions["mapapi.idempotency"].ttl == timedelta(hours=2)


def test_a_request_refused_by_its_own_bucket_frees_the_key(key_factory):
    api = key_factory({"RATELIMIT_MAP_CREATE": "1 per 2 seconds"})
    assert api.post("/maps", json={"title": "A"}).status_code == 201
    refused = api.post("/maps", json={"title": "B"}, headers=keyed("later"))
    assert refused.status_code == 429
    time.sleep(2.1)
    later = api.post("/maps", json={"title": "B"}, headers=keyed("later"))
    assert later.status_code == 201 and "Idempotent-Replayed" not in later.headers


# --- races ------------------------------------------------------------------------------


def race(calls) -> list:
    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def worker(index, call):
        barrier.wait(timeout=10)
        try:
            results[index] = call()
        except Exception as error:  # noqa: BLE001 - reported below
            results[index] = error

    threads = [threading.Thread(target=worker, args=item) for item in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=TIMEOUT + 10)
    failures = [r for r in results if not isinstance(r, requests.Response)]
    assert not failures, failures
    return results


def assert_one_ran(results) -> None:
    """One answer ran the request; every other replayed it or found it running."""
    ran = [
        r
        for r in results
        if r.status_code == 201 and "Idempotent-Replayed" not in r.headers
    ]
    assert len(ran) == 1, [(r.status_code, r.text) for r in results]
    for other in results:
        if other is ran[0]:
            continue
        if other.status_code == 409:
            assert other.json()["error"]["code"] == "IDEMPOTENCY_KEY_IN_USE"
            assert other.headers["Retry-After"] == "1"
        else:
            assert other.status_code == 201, other.text
            assert other.headers["Idempotent-Replayed"] == "true"
            assert other.content == ran[0].content


def test_ten_concurrent_requests_with_one_key_create_one_bulk(
    app, live_server, key, api
):
    map_id = make_map(api)["id"]
    url = f"{live_server}/api/v1/maps/{map_id}/locations/bulk"
    body = {"locations": [{"name": f"p{i}", "lat": 1, "lng": 2} for i in range(50)]}
    for round_ in range(3):
        headers = {
            "Authorization": f"Bearer {key}",
            "Idempotency-Key": f"bulk-{round_}",
        }
        results = race(
            [
                lambda h=headers: requests.post(
                    url, json=body, headers=h, timeout=TIMEOUT
                )
            ]
            * 10
        )
        assert_one_ran(results)
    assert count(app, Location) == 150


# --- several processes, and a process killed mid-request ---------------------------------


def serve_env(tmp_path, database_url: str, **extra) -> dict:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("MAPAPI_")
    }
    env.update(
        MAPAPI_DATABASE_URL=database_url,
        MAPAPI_INSTANCE_PATH=str(tmp_path / "instance"),
        MAPAPI_BOOTSTRAP="0",
        MAPAPI_RATELIMIT_GENERAL="100000 per hour",
        MAPAPI_RATELIMIT_MAP_CREATE="100000 per hour",
        MAPAPI_RATELIMIT_BULK="100000 per hour",
        **extra,
    )
    return env


def new_secret(env: dict, cwd) -> str:
    email = f"{uuid.uuid4().hex[:8]}@example.com"
    for args in (
        ["accounts", "create", email],
        ["keys", "create", email, "--name", "t"],
    ):
        done = subprocess.run(
            [mapapi_program(), *args],
            check=False,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def count_rows(database_url: str, table: str) -> int:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            return connection.execute(
                text(f"SELECT count(*) FROM {table}")  # noqa: S608 - the test's own table names
            ).scalar_one()
    finally:
        engine.dispose()


def test_two_processes_on_postgresql_run_a_key_once(
    postgres_server, redis_url, tmp_path
):
    database_url = backends.create_postgres_database()
    env = serve_env(tmp_path, database_url, MAPAPI_RATELIMIT_STORAGE_URI=redis_url)
    (tmp_path / "instance").mkdir()
    (tmp_path / "instance" / "config.py").write_text(
        f"RATELIMIT_KEY_PREFIX = {backends.unique_prefix()!r}\n"
    )
    servers = []
    try:
        servers = [ServeProcess(env, tmp_path, "a"), ServeProcess(env, tmp_path, "b")]
        for server in servers:
            server.wait_until_up(30)
        secret = new_secret(env, tmp_path)
        for round_ in range(5):
            headers = {
                "Authorization": f"Bearer {secret}",
                "Idempotency-Key": f"map-{round_}",
            }
            calls = [
                lambda base=servers[i % 2].base, h=headers: requests.post(
                    base + "/api/v1/maps",
                    json={"title": "Once"},
                    headers=h,
                    timeout=TIMEOUT,
                )
                for i in range(10)
            ]
            assert_one_ran(race(calls))
        assert count_rows(database_url, "maps") == 5
    finally:
        for server in servers:
            server.stop()
        backends.drop_postgres_database(database_url)


def test_a_process_killed_mid_request_leaves_a_key_a_retry_can_use(tmp_path):
    """Kill the server at moments spread over a bulk's run; a retry after a
    restart gets the kept answer or runs afresh: 100 locations, never 200."""
    database_url = f"sqlite:///{tmp_path / 'crash.sqlite3'}"
    env = serve_env(tmp_path, database_url, MAPAPI_IDEMPOTENCY_LEASE_SECONDS="1")
    server = ServeProcess(env, tmp_path, "first")
    server.wait_until_up(30)
    secret = new_secret(env, tmp_path)
    auth = {"Authorization": f"Bearer {secret}"}
    body = {"locations": [{"name": f"p{i}", "lat": 1, "lng": 2} for i in range(100)]}
    outcomes = set()
    try:
        for attempt, delay in enumerate([0.0, 0.01, 0.02, 0.04, 0.08, 0.15]):
            made = requests.post(
                server.base + "/api/v1/maps", json={"title": "m"}, headers=auth, timeout=30
            )
            map_id = made.json()["data"]["id"]
            url = f"/api/v1/maps/{map_id}/locations/bulk"
            headers = {**auth, "Idempotency-Key": f"crash-{attempt}"}
            sender = threading.Thread(
                target=_post_quietly,
                args=(server.base + url, body, headers),
                daemon=True,
            )
            sender.start()
            time.sleep(delay)
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=10)
            sender.join(timeout=TIMEOUT)
            server = ServeProcess(env, tmp_path, f"after-{attempt}")
            server.wait_until_up(30)
            answer = _retry_until_settled(server.base + url, body, headers)
            assert answer.status_code == 201, answer.text
            outcomes.add(answer.headers.get("Idempotent-Replayed", "ran"))
            locations = requests.get(
                server.base + f"/api/v1/maps/{map_id}/locations?pageSize=1",
                headers=auth,
                timeout=30,
            ).json()["data"]["pagination"]["total"]
            assert locations == 100
            assert answer.json()["data"]["count"] == 100
    finally:
        server.stop()
    # Which of the two a kill gave depends on timing: both are right.
    assert outcomes <= {"ran", "true"}


def _post_quietly(url, body, headers) -> None:
    try:
        requests.post(url, json=body, headers=headers, timeout=TIMEOUT)
    except requests.RequestException:
        pass


def _retry_until_settled(url, body, headers) -> requests.Response:
    """Retry as a client should: on 409 IDEMPOTENCY_KEY_IN_USE after Retry-After."""
    deadline = time.monotonic() + 15
    while True:
        answer = requests.post(url, json=body, headers=headers, timeout=TIMEOUT)
        if answer.status_code != 409 or time.monotonic() > deadline:
            return answer
        time.sleep(int(answer.headers["Retry-After"]))


@pytest.fixture
def key_factory(app_config, tmp_path):
    """An API client of a fresh app built with extra settings."""
    from mapapi import create_app

    from .factories import ApiClient, create_account, create_key

    def build(settings: dict):
        app_config.update(settings)
        app = create_app(app_config)
        with app.app_context():
            if db.engine.dialect.name == "sqlite":
                db.create_all()
            else:
                backends.empty_tables(db)
        create_account(app, "limited@example.com")
        return ApiClient(app.test_client(), create_key(app, "limited@example.com"))

    return build
