"""Events: one per resource whose updatedAt moved, one per deleted resource,
the GET body as data, recorded with the change; and the feed that reads them."""

import random
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from mapapi.extensions import db
from mapapi.services import events as event_service
from mapapi.storage.models import Event
from mapapi.timeutil import utcnow

from .factories import (
    ApiClient,
    create_key,
    error_code,
    make_layer,
    make_location,
    make_map,
    make_tag,
)

CHILDREN = ("locations", "categories", "tags", "layers")
SINGULAR = {"locations": "location", "categories": "category", "tags": "tag", "layers": "layer"}


def read_feed(api: ApiClient, after=None, **query) -> list[dict]:
    """Every event after ``after``, following ``next`` page by page."""
    seen = []
    while True:
        params = dict(query, limit=100, **({} if after is None else {"after": after}))
        response = api.get("/events", query_string=params)
        assert response.status_code == 200, response.get_json()
        page = response.get_json()["data"]
        seen.extend(page["events"])
        after = page["next"]
        if not page["hasMore"]:
            return seen


def latest(api: ApiClient):
    return api.get("/events?after=latest").get_json()["data"]["next"]


def snapshot(api: ApiClient) -> dict:
    """Every resource of the account, by (kind, id): its GET body."""
    found = {}
    for map_ in api.get("/maps?pageSize=100").get_json()["data"]["maps"]:
        found["map", map_["id"]] = map_
        for plural in CHILDREN:
            listed = api.get(f"/maps/{map_['id']}/{plural}?pageSize=100").get_json()["data"]
            for item in listed[plural]:
                found[SINGULAR[plural], item["id"]] = item
    return found


def expected_events(before: dict, after: dict) -> dict:
    """What events a change from ``before`` to ``after`` must record, by (kind, id)."""
    deleted_maps = {key[1] for key in before if key[0] == "map" and key not in after}
    expected = {}
    for (kind, id_), body in after.items():
        if (kind, id_) not in before:
            expected[kind, id_] = (f"{kind}.created", body)
        elif before[kind, id_]["updatedAt"] != body["updatedAt"]:
            expected[kind, id_] = (f"{kind}.updated", body)
        else:
            assert before[kind, id_] == body, "a resource changed but its updatedAt did not"
    for (kind, id_), body in before.items():
        if (kind, id_) in after:
            continue
        if kind == "map":
            expected[kind, id_] = ("map.deleted", {"id": id_})
        elif body["mapId"] not in deleted_maps:
            expected[kind, id_] = (f"{kind}.deleted", {"id": id_, "mapId": body["mapId"]})
    return expected


def assert_events_match(api: ApiClient, cursor, before: dict) -> tuple:
    """The events after ``cursor`` are exactly what the change from ``before`` made."""
    after = snapshot(api)
    recorded = read_feed(api, cursor)
    got = {}
    for event in recorded:
        kind = event["type"].split(".")[0]
        key = (kind, event["data"]["id"])
        assert key not in got, f"two events for {key}: {recorded}"
        got[key] = (event["type"], event["data"])
        map_id = event["data"]["id"] if kind == "map" else event["data"]["mapId"]
        assert event["mapId"] == map_id
    assert got == expected_events(before, after)
    return after, (recorded[-1]["id"] if recorded else cursor), recorded


class Scenario:
    """Runs requests, checking after each one that its events are exactly right."""

    def __init__(self, api: ApiClient):
        self.api = api
        self.state = snapshot(api)
        self.cursor = latest(api)

    def run(self, method: str, path: str, body=None, status=200):
        response = self.api.request(method, path, json=body)
        assert response.status_code == status, response.get_json()
        self.state, self.cursor, recorded = assert_events_match(self.api, self.cursor, self.state)
        return response.get_json()["data"] if response.status_code < 300 else None, recorded


def test_every_kind_of_change_records_exactly_its_events(api):
    run = Scenario(api).run
    map_, events = run("POST", "/maps", {"title": "Events"}, 201)
    assert [e["type"] for e in events] == ["map.created"]
    m = f"/maps/{map_['id']}"
    category, _ = run("POST", f"{m}/categories", {"name": "c"}, 201)
    tag, _ = run("POST", f"{m}/tags", {"name": "t"}, 201)
    tag2, _ = run("POST", f"{m}/tags", {"name": "t2"}, 201)
    first, _ = run("POST", f"{m}/layers", {"name": "first"}, 201)
    second, _ = run("POST", f"{m}/layers", {"name": "second"}, 201)
    spot = {"name": "s", "lat": 1, "lng": 2, "categoryId": category["id"]}
    located, _ = run("POST", f"{m}/locations", {**spot, "tagIds": [tag["id"], tag2["id"]]}, 201)
    run("PUT", f"{m}/locations/{located['id']}/layers", {"layerIds": [second["id"]]})
    bulk, events = run("POST", f"{m}/locations/bulk", {"locations": [spot] * 3}, 201)
    assert [e["data"]["id"] for e in events] == [item["id"] for item in bulk["created"]]
    # A layer inserted first shifts the others: they and their locations change.
    _, events = run("POST", f"{m}/layers", {"name": "zero", "order": 0}, 201)
    assert [e["type"] for e in events] == [
        "layer.created", "layer.updated", "layer.updated", "location.updated",
    ]  # fmt: skip
    # No-ops record nothing.
    loc = f"{m}/locations/{located['id']}"
    for path, body in ((loc, {}), (loc, {"name": "s"}), (m, {"title": "Events"})):
        _, events = run("PUT", path, body)
        assert events == []
    _, events = run("PUT", f"{loc}/layers", {"layerIds": [second["id"]]})
    assert events == []
    run("PUT", f"{loc}/layers", {"layerIds": [first["id"], second["id"]]})
    run("PUT", loc, {"tagIds": [tag2["id"]], "properties": {"a": 1}})
    run("PUT", f"{m}/layers/{first['id']}", {"order": 2})
    run("PUT", f"{m}/layers/{second['id']}", {"color": "#000000"})
    run("PUT", f"{m}/categories/{category['id']}", {"icon": "pin"})
    run("PUT", f"{m}/tags/{tag['id']}", {"name": "renamed"})
    run("PUT", m, {"title": "Renamed"})
    run("DELETE", f"{m}/tags/{tag2['id']}")
    run("DELETE", f"{m}/categories/{category['id']}")
    _, events = run("DELETE", f"{m}/layers/{first['id']}")
    assert events[0]["type"] == "layer.deleted"
    _, events = run("DELETE", loc)
    assert [e["type"] for e in events] == ["location.deleted"]
    _, events = run("DELETE", m)
    assert [(e["type"], e["data"], e["mapId"]) for e in events] == [
        ("map.deleted", {"id": map_["id"]}, map_["id"])
    ]


def test_random_changes_always_record_exactly_their_events(api):
    """A few hundred random requests, each checked against the resources' updatedAt."""
    rng = random.Random(17)
    scenario = Scenario(api)
    maps = [make_map(api, title=f"m{n}")["id"] for n in range(2)]
    scenario.state, scenario.cursor, _ = assert_events_match(api, scenario.cursor, scenario.state)

    def ids(map_id, kind):
        return [key[1] for key, body in scenario.state.items() if key[0] == kind and body.get("mapId") == map_id]

    for _ in range(120):
        map_id = rng.choice(maps)
        m = f"/maps/{map_id}"
        layers, tags, cats, locs = (ids(map_id, k) for k in ("layer", "tag", "category", "location"))
        choice = rng.randrange(11)
        some = lambda xs, k: rng.sample(xs, min(k, len(xs)))  # noqa: E731
        if choice == 0:
            scenario.run("POST", f"{m}/layers", {"name": "l", "order": rng.randrange(4)}, 201)
        elif choice == 1 and layers:
            scenario.run("PUT", f"{m}/layers/{rng.choice(layers)}", rng.choice(
                [{"order": rng.randrange(5)}, {"name": rng.choice("ab")}, {}]))
        elif choice == 2 and layers:
            scenario.run("DELETE", f"{m}/layers/{rng.choice(layers)}")
        elif choice == 3:
            scenario.run("POST", f"{m}/tags", {"name": f"t{rng.randrange(10**9)}"}, 201)
        elif choice == 4 and tags:
            scenario.run(rng.choice(["DELETE", "PUT"]), f"{m}/tags/{rng.choice(tags)}", {})
        elif choice == 5:
            scenario.run("POST", f"{m}/categories", {"name": "c"}, 201)
        elif choice == 6 and cats:
            scenario.run("DELETE", f"{m}/categories/{rng.choice(cats)}")
        elif choice in (7, 8):
            item = {"name": "x", "lat": 0, "lng": 0, "tagIds": some(tags, 2),
                    "categoryId": rng.choice(cats + [None])}
            if rng.random() < 0.5:
                scenario.run("POST", f"{m}/locations", item, 201)
            else:
                scenario.run("POST", f"{m}/locations/bulk", {"locations": [item] * 3}, 201)
        elif choice == 9 and locs:
            path = f"{m}/locations/{rng.choice(locs)}"
            if rng.random() < 0.5:
                scenario.run("PUT", f"{path}/layers", {"layerIds": some(layers, 2)})
            else:
                scenario.run("PUT", path, {"name": rng.choice("ab"), "tagIds": some(tags, 2)})
        elif choice == 10 and locs:
            scenario.run("DELETE", f"{m}/locations/{rng.choice(locs)}")
    # Enough happened for the check to mean something.
    assert len(read_feed(api)) > 120


def test_data_is_the_get_body_right_after_the_change(api):
    map_id = make_map(api)["id"]
    layer = make_layer(api, map_id)
    location = make_location(api, map_id, properties={"big": 2**70})
    api.put(f"/maps/{map_id}/locations/{location['id']}/layers", json={"layerIds": [layer["id"]]})
    cursor = latest(api)
    api.put(f"/maps/{map_id}/layers/{layer['id']}", json={"name": "renamed"})
    (layer_event, location_event) = read_feed(api, cursor)
    got = api.get(f"/maps/{map_id}/locations/{location['id']}").get_json()["data"]
    assert location_event["data"] == got
    assert location_event["data"]["layers"][0]["name"] == "renamed"
    assert location_event["data"]["properties"] == {"big": 2**70}
    assert layer_event["data"] == api.get(f"/maps/{map_id}/layers/{layer['id']}").get_json()["data"]


def test_a_failed_request_records_nothing(api):
    map_id = make_map(api)["id"]
    make_tag(api, map_id, name="taken")
    cursor = latest(api)
    assert api.post(f"/maps/{map_id}/tags", json={"name": "taken"}).status_code == 409
    bad = {"locations": [{"name": "ok", "lat": 0, "lng": 0}, {"name": "bad", "lat": 99, "lng": 0}]}
    assert api.post(f"/maps/{map_id}/locations/bulk", json=bad).status_code == 400
    assert read_feed(api, cursor) == []
    assert latest(api) == cursor


def test_event_shape(api):
    map_ = make_map(api)
    (event,) = read_feed(api)
    assert set(event) == {"id", "type", "createdAt", "mapId", "data"}
    assert isinstance(event["id"], str) and event["type"] == "map.created"
    assert event["mapId"] == map_["id"] and event["data"] == map_
    assert event["createdAt"].endswith("Z") and len(event["createdAt"]) == 24


# --- the feed ------------------------------------------------------------------


@pytest.fixture
def three_maps(api):
    return [make_map(api, title=f"map {n}")["id"] for n in range(3)]


def test_feed_pages_by_cursor_and_says_whether_more_follow(api, three_maps):
    first = api.get("/events?limit=2").get_json()["data"]
    assert [e["data"]["id"] for e in first["events"]] == three_maps[:2]
    assert first["hasMore"] is True and first["next"] == first["events"][-1]["id"]
    rest = api.get(f"/events?after={first['next']}&limit=2").get_json()["data"]
    assert [e["data"]["id"] for e in rest["events"]] == three_maps[2:]
    assert rest["hasMore"] is False and rest["next"] == rest["events"][-1]["id"]
    empty = api.get(f"/events?after={rest['next']}").get_json()
    assert empty == {"data": {"events": [], "next": rest["next"], "hasMore": False}}


def test_after_latest_and_null(api, other_api):
    assert other_api.get("/events?after=latest").get_json() == {
        "data": {"events": [], "next": None, "hasMore": False}
    }
    assert other_api.get("/events").get_json() == {
        "data": {"events": [], "next": None, "hasMore": False}
    }
    make_map(api)
    make_map(api)
    everything = api.get("/events").get_json()["data"]
    now = api.get("/events?after=latest").get_json()["data"]
    assert now == {"events": [], "next": everything["events"][-1]["id"], "hasMore": False}
    assert api.get("/events?after=null").get_json()["data"] == everything
    new = make_map(api)
    (event,) = api.get(f"/events?after={now['next']}").get_json()["data"]["events"]
    assert event["data"] == new


def test_feed_filters_by_map_and_type(api, three_maps):
    first, second, _ = three_maps
    make_location(api, first)
    layer = make_layer(api, second)
    api.put(f"/maps/{second}/layers/{layer['id']}", json={"name": "x"})
    by_map = read_feed(api, mapId=second)
    assert [e["type"] for e in by_map] == ["map.created", "layer.created", "layer.updated"]
    by_type = read_feed(api, types="layer.*,location.created")
    assert [e["type"] for e in by_type] == ["location.created", "layer.created", "layer.updated"]
    both = api.get(f"/events?mapId={second}&types=layer.updated&limit=1").get_json()["data"]
    assert [e["type"] for e in both["events"]] == ["layer.updated"] and both["hasMore"] is False
    filtered = api.get("/events?types=map.created&limit=2").get_json()["data"]
    assert filtered["hasMore"] is True
    unknown_map = api.get("/events?mapId=" + "A" * 22).get_json()["data"]
    assert unknown_map["events"] == [] and unknown_map["next"] is None


def test_events_of_a_deleted_map_stay_in_the_feed(api):
    map_id = make_map(api)["id"]
    make_location(api, map_id)
    api.delete(f"/maps/{map_id}")
    assert [e["type"] for e in read_feed(api, mapId=map_id)] == [
        "map.created", "location.created", "map.deleted",
    ]  # fmt: skip


def test_each_account_reads_only_its_own_events(api, other_api):
    make_map(api)
    mine = api.get("/events").get_json()["data"]["next"]
    make_map(other_api)
    theirs = read_feed(other_api)
    assert len(theirs) == 1 and theirs[0]["id"] != mine
    response = other_api.get(f"/events?after={mine}")
    assert error_code(response) == "VALIDATION_ERROR"
    assert list(response.get_json()["error"]["details"]) == ["after"]


@pytest.mark.parametrize(
    "query, field",
    [
        ("after=", "after"), ("after=abc", "after"), ("after=-1", "after"),
        ("after=1.0", "after"), ("after=" + "9" * 30, "after"), ("after=%EF%BC%91", "after"),
        ("limit=0", "limit"), ("limit=101", "limit"), ("limit=+5", "limit"), ("limit=", "limit"),
        ("types=", "types"), ("types=ping", "types"), ("types=map.*,nope", "types"),
        ("types=*", "types"), ("mapId=nope", "mapId"),
    ],
)  # fmt: skip
def test_bad_queries_are_validation_errors(api, query, field):
    make_map(api)
    response = api.get(f"/events?{query}")
    assert response.status_code == 400
    assert error_code(response) == "VALIDATION_ERROR"
    assert list(response.get_json()["error"]["details"]) == [field]


def test_an_id_that_is_no_event_is_a_validation_error(api):
    make_map(api)
    make_map(api)
    newest = int(latest(api))
    response = api.get(f"/events?after={newest + 1000}")
    assert error_code(response) == "VALIDATION_ERROR"


def test_read_only_keys_may_read_the_feed(app, api, client):
    make_map(api)
    reader = ApiClient(client, create_key(app, "owner@example.com", scope="READ_ONLY"))
    assert reader.get("/events").get_json()["data"]["events"][0]["type"] == "map.created"


def test_a_cursor_older_than_what_is_kept_is_gone(app, api):
    old = make_map(api)
    first = latest(api)
    kept = make_map(api)
    with app.app_context():
        db.session.execute(
            update(Event).where(Event.id == int(first)).values(created_at=utcnow() - timedelta(days=31))
        )
        db.session.commit()
    # Not swept yet, but no longer kept: not shown, and its id is an expired cursor.
    assert [e["data"]["id"] for e in read_feed(api)] == [kept["id"]]
    response = api.get(f"/events?after={first}")
    assert response.status_code == 410
    assert error_code(response) == "CURSOR_EXPIRED"
    with app.app_context():
        assert event_service.sweep() == 1
        db.session.commit()
        assert db.session.scalar(select(func.count()).select_from(Event)) == 1
    assert error_code(api.get(f"/events?after={first}")) == "CURSOR_EXPIRED"
    assert old["id"] not in {e["data"]["id"] for e in read_feed(api)}


def test_retention_is_configurable(app_config, tmp_path):
    from mapapi import create_app

    app_config["EVENTS_RETENTION_DAYS"] = "2"
    app = create_app(app_config)
    with app.test_request_context():
        assert utcnow() - event_service.retention_cutoff() == pytest.approx(
            timedelta(days=2), abs=timedelta(seconds=5)
        )
    app_config["EVENTS_RETENTION_DAYS"] = "soon"
    with pytest.raises(ValueError, match="EVENTS_RETENTION_DAYS"):
        create_app(app_config)


def test_the_sweep_command_deletes_what_is_no_longer_kept(app, api, runner):
    make_map(api)
    make_map(api)
    with app.app_context():
        db.session.execute(update(Event).values(created_at=utcnow() - timedelta(days=40)))
        db.session.commit()
    kept = make_map(api)
    result = runner.invoke(args=["events", "sweep"])
    assert result.exit_code == 0, result.output
    assert result.output == "2 events deleted\n"
    assert [e["data"]["id"] for e in read_feed(api)] == [kept["id"]]
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Event)) == 1


def test_writers_sweep_by_themselves(app, api, monkeypatch):
    make_map(api)
    with app.app_context():
        db.session.execute(update(Event).values(created_at=utcnow() - timedelta(days=40)))
        db.session.commit()
    monkeypatch.setattr(event_service.sweep_if_due.__self__, "due", 0.0)
    kept = make_map(api)  # this write's transaction sweeps
    with app.app_context():
        assert list(db.session.scalars(select(Event.map_id))) == [kept["id"]]


def test_the_feed_is_described_in_the_openapi_document(client):
    document = client.get("/api/v1/openapi.json").get_json()
    described = document["paths"]["/events"]["get"]
    assert described["operationId"] == "events_list_events"
    assert {"400", "401", "403", "410", "429"} <= set(described["responses"])
    assert "CURSOR_EXPIRED" in described["responses"]["410"]["description"]
    assert {p["name"] for p in described["parameters"]} >= {"after", "limit", "mapId", "types"}
