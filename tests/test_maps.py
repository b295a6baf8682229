"""Maps: create, read, list, update, delete."""

import re
import time
from datetime import datetime, timedelta, timezone

import pytest
from slugify import slugify
from sqlalchemy import select

from mapapi.extensions import db
from mapapi.storage.models import (
    Category,
    Layer,
    Location,
    LocationTag,
    Map,
    Tag,
    location_layers,
)

from .factories import (
    error_code,
    make_category,
    make_layer,
    make_location,
    make_map,
    make_tag,
)
from .helpers import data_of, field_errors, outcome

MAP_FIELDS = {
    "id",
    "title",
    "slug",
    "description",
    "country",
    "city",
    "public",
    "allowCloning",
    "style",
    "centerLat",
    "centerLng",
    "zoom",
    "userId",
    "createdAt",
    "updatedAt",
}
STYLES = ["streets", "outdoors", "light", "dark", "satellite", "satellite-streets"]
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
URL_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{22,}")


def get_map(api, map_id):
    return data_of(api.get(f"/maps/{map_id}"))


def parse(timestamp: str) -> datetime:
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


# --- create -----------------------------------------------------------------


def test_create_map_applies_defaults_and_slug(api):
    response = api.post("/maps", json={"title": "  Café de Flore — Paris!  "})
    assert response.status_code == 201
    body = response.get_json()
    assert set(body) == {"data"}
    created = body["data"]
    assert created["title"] == "Café de Flore — Paris!"
    assert created["slug"] == "cafe-de-flore-paris"
    assert created["description"] == "" and created["style"] == "streets"
    assert created["public"] is False and created["allowCloning"] is True
    assert created["centerLat"] is None and created["zoom"] is None
    assert created["createdAt"] == created["updatedAt"]
    assert created["createdAt"].endswith("Z") and len(created["createdAt"]) == 24


def test_created_map_has_every_field_and_is_stored(api, account):
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    created = data_of(api.post("/maps", json={"title": "Test map"}), 201)
    assert set(created) == MAP_FIELDS
    assert created["country"] == "" and created["city"] == ""
    assert created["centerLng"] is None
    assert created["userId"] == account
    assert TIMESTAMP.fullmatch(created["createdAt"])
    after = datetime.now(timezone.utc) + timedelta(seconds=1)
    assert before <= parse(created["createdAt"]) <= after
    assert get_map(api, created["id"]) == created


def test_create_map_stores_every_field_as_sent(api):
    body = {
        "title": "  Cafe\u0301 trip  ",
        "description": "  Notes\nwith lines  ",
        "country": " France ",
        "city": " Paris ",
        "public": True,
        "allowCloning": False,
        "style": "satellite-streets",
        "centerLat": 48.8566,
        "centerLng": 2.3522,
        "zoom": 12.5,
    }
    created = data_of(api.post("/maps", json=body), 201)
    expected = {
        "title": "Cafe\u0301 trip",  # trimmed, not normalized
        "description": "Notes\nwith lines",
        "country": "France",
        "city": "Paris",
        "public": True,
        "allowCloning": False,
        "style": "satellite-streets",
        "centerLat": 48.8566,
        "centerLng": 2.3522,
        "zoom": 12.5,
    }
    assert {name: created[name] for name in expected} == expected
    assert get_map(api, created["id"]) == created


def test_map_ids_are_url_safe_distinct_and_long(api):
    ids = [make_map(api)["id"] for _ in range(3)]
    assert all(URL_SAFE_ID.fullmatch(map_id) for map_id in ids), ids
    assert len(set(ids)) == 3


def test_every_style_is_accepted(api):
    for style in STYLES:
        created = data_of(api.post("/maps", json={"title": "Styled", "style": style}), 201)
        assert created["style"] == style
        assert get_map(api, created["id"])["style"] == style


LIMIT_VALUES = [
    {"title": "a" * 200},
    {"title": "  " + "é" * 200 + "  "},
    {"description": "d" * 10_000},
    {"description": ""},
    {"country": "c" * 100, "city": "ü" * 100},
    {"country": "", "city": ""},
    {"centerLat": -90, "centerLng": -180, "zoom": 0},
    {"centerLat": 90, "centerLng": 180, "zoom": 22},
    {"centerLat": 0.5, "centerLng": -0.25, "zoom": 21.999},
    {"centerLat": None, "centerLng": None, "zoom": None},
]


def test_values_at_the_limits_are_accepted(api):
    for fields in LIMIT_VALUES:
        created = data_of(api.post("/maps", json={"title": "Limits", **fields}), 201)
        for name, value in fields.items():
            assert created[name] == (value.strip() if isinstance(value, str) else value), name
        assert get_map(api, created["id"]) == created


def test_lengths_count_characters_not_bytes(api):
    title = "🗺" * 200  # 200 characters, 800 bytes in UTF-8
    created = data_of(api.post("/maps", json={"title": title}), 201)
    assert created["title"] == title
    assert field_errors(api.post("/maps", json={"title": title + "🗺"})).keys() == {"title"}


INVALID_VALUES = {
    "title": ["", "   ", "a" * 201, " " + "a" * 201 + " ", "a\x00b", None, 5, ["Trip"]],
    "description": ["d" * 10_001, "\x00", None, 1],
    "country": ["c" * 101, None, 3],
    "city": ["c" * 101, None, 7],
    "public": [1, 0, "true", None, "false"],
    "allowCloning": [0, 1, "false", None],
    "style": [" dark ", "dark ", "Dark", "", "terrain", None, 1],
    "centerLat": [90.0001, -91, 10**400, "45", True, [1], {}],
    "centerLng": [180.5, -181, "2.35", False],
    "zoom": [-0.1, 22.01, "5", True, [5]],
}


@pytest.mark.parametrize("name", INVALID_VALUES)
def test_create_refuses_invalid_values_naming_the_field(api, name):
    values = INVALID_VALUES[name]
    outcomes = {
        repr(v): outcome(api.post("/maps", json={"title": "Valid", name: v})) for v in values
    }
    assert outcomes == {repr(v): (400, "VALIDATION_ERROR", [name]) for v in values}
    assert data_of(api.get("/maps"))["pagination"]["total"] == 0


@pytest.mark.parametrize("name", INVALID_VALUES)
def test_update_refuses_invalid_values_and_changes_nothing(api, name):
    created = make_map(api)
    values = INVALID_VALUES[name]
    target = f"/maps/{created['id']}"
    outcomes = {repr(v): outcome(api.put(target, json={name: v})) for v in values}
    assert outcomes == {repr(v): (400, "VALIDATION_ERROR", [name]) for v in values}
    assert get_map(api, created["id"]) == created


def test_nan_and_infinity_are_field_errors(api):
    literals = [
        ("centerLat", "NaN"),
        ("centerLng", "Infinity"),
        ("zoom", "-Infinity"),
        ("zoom", "1e400"),  # too large for a double: read as Infinity
    ]
    for name, literal in literals:
        raw = f'{{"title": "Valid", "{name}": {literal}}}'
        response = api.post("/maps", data=raw, content_type="application/json")
        assert field_errors(response).keys() == {name}, literal
    assert data_of(api.get("/maps"))["pagination"]["total"] == 0


def test_create_without_title_names_it(api):
    assert field_errors(api.post("/maps", json={"description": "no title"})).keys() == {"title"}
    assert field_errors(api.post("/maps", json={})).keys() == {"title"}
    assert data_of(api.get("/maps"))["pagination"]["total"] == 0


def test_every_invalid_field_is_named_at_once(api):
    body = {"title": "", "public": 1, "zoom": "5", "style": " dark "}
    assert field_errors(api.post("/maps", json=body)).keys() == {"title", "public", "zoom", "style"}


@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_unknown_fields_are_refused_by_name(api, method):
    created = make_map(api)
    path = "/maps" if method == "POST" else f"/maps/{created['id']}"
    # mapId is read-only on other resources but a map has none.
    body = {"title": "New", "colour": "red", "mapId": created["id"], "layers": []}
    details = field_errors(api.request(method, path, json=body))
    assert details.keys() == {"colour", "mapId", "layers"}
    assert [m["id"] for m in data_of(api.get("/maps"))["maps"]] == [created["id"]]
    assert get_map(api, created["id"]) == created


def test_read_only_fields_are_ignored_on_create(api, account, other_api):
    other_map = make_map(other_api)
    body = {
        "title": "Real title",
        "id": other_map["id"],
        "slug": "forged-slug",
        "userId": other_map["userId"],
        "createdAt": "2000-01-01T00:00:00.000Z",
        "updatedAt": ["any", "value"],
    }
    created = data_of(api.post("/maps", json=body), 201)
    assert created["id"] != other_map["id"]
    assert created["slug"] == "real-title"
    assert created["userId"] == account
    assert created["createdAt"] == created["updatedAt"]
    assert abs(parse(created["createdAt"]) - datetime.now(timezone.utc)) < timedelta(minutes=1)
    assert get_map(api, created["id"]) == created
    assert get_map(other_api, other_map["id"]) == other_map


def test_read_only_fields_are_ignored_on_update(api, other_api):
    created = make_map(api, title="Kept")
    body = {
        "id": "forged",
        "slug": "forged",
        "userId": make_map(other_api)["userId"],
        "createdAt": 12,
        "updatedAt": None,
    }
    assert data_of(api.put(f"/maps/{created['id']}", json=body)) == created
    assert get_map(api, created["id"]) == created


# --- slug -------------------------------------------------------------------

SLUG_TITLES = [
    "Hello World",
    "snake_case_title",
    "a_b__c",
    "Café de Flore — Paris!",
    "Москва",
    "東京タワー",
    "北京 & 上海",
    "I ❤ maps 🗺️",
    "--Already-Slugged--",
    "C'est l'été",
    "100% pure",
    "Straße",
    "Ελληνικά",
    "１２３",
]


def test_slug_is_python_slugify_of_the_title(api):
    expected = {title: slugify(title) for title in SLUG_TITLES}
    assert all(expected.values())  # these titles all leave something
    slugs = {title: make_map(api, title=title)["slug"] for title in SLUG_TITLES}
    assert slugs == expected
    listed = data_of(api.get("/maps"))["maps"]
    assert {m["title"]: m["slug"] for m in listed} == expected


def test_slug_is_map_when_nothing_is_left(api):
    for title in ["!!!", "___", "🗺️", "— ❤ —"]:
        assert slugify(title) == ""
        created = data_of(api.post("/maps", json={"title": title}), 201)
        assert created["slug"] == "map", title
        renamed = data_of(api.put(f"/maps/{make_map(api)['id']}", json={"title": title}))
        assert renamed["slug"] == "map", title


def test_slug_follows_a_title_change(api):
    created = make_map(api, title="Original")
    for title in ["snake_case_title", "東京タワー", "I ❤ maps 🗺️", "!!!", "Back again"]:
        updated = data_of(api.put(f"/maps/{created['id']}", json={"title": title}))
        assert updated["slug"] == (slugify(title) or "map"), title
        assert get_map(api, created["id"])["slug"] == updated["slug"]


def test_slug_changes_only_when_the_title_does(api):
    created = make_map(api, title="First Title")
    path = f"/maps/{created['id']}"
    updated = data_of(api.put(path, json={"description": "new", "slug": "custom-slug"}))
    assert updated["slug"] == "first-title"
    updated = data_of(api.put(path, json={"title": "First Title"}))
    assert updated["slug"] == "first-title"
    assert get_map(api, created["id"])["slug"] == "first-title"


def test_slugs_are_not_unique(api):
    first, second = make_map(api, title="Same"), make_map(api, title="Same")
    assert first["slug"] == second["slug"] == "same"
    assert first["id"] != second["id"]


# --- read and list ----------------------------------------------------------


def test_list_maps_shows_only_the_callers_maps_in_creation_order(api, other_api):
    mine = [make_map(api, title=f"Mine {n}") for n in range(3)]
    theirs = make_map(other_api, title="Theirs")
    listed = data_of(api.get("/maps"))
    assert listed["maps"] == mine
    assert listed["pagination"] == {"total": 3, "page": 1, "pageSize": 50, "totalPages": 1}
    assert data_of(other_api.get("/maps"))["maps"] == [theirs]


def test_another_accounts_map_is_not_found(api, other_api):
    theirs = make_map(other_api)
    for method in ("GET", "PUT", "DELETE"):
        response = api.request(method, f"/maps/{theirs['id']}", json={"title": "Mine now"})
        assert outcome(response) == (404, "NOT_FOUND", []), method
    assert get_map(other_api, theirs["id"]) == theirs


def test_unknown_map_is_not_found(api):
    assert error_code(api.get("/maps/nope")) == "NOT_FOUND"


def test_malformed_or_unknown_map_id_is_not_found(api):
    make_map(api)
    requests = [
        (method, map_id)
        for map_id in ["nope", "x" * 300, "%00", "0", "...", "%F0%9F%97%BA"]
        for method in ("GET", "PUT", "DELETE")
    ]
    outcomes = {
        (method, map_id): outcome(api.request(method, f"/maps/{map_id}", json={"title": "x"}))
        for method, map_id in requests
    }
    assert outcomes == {request: (404, "NOT_FOUND", []) for request in requests}
    assert data_of(api.get("/maps"))["pagination"]["total"] == 1


# --- update -----------------------------------------------------------------


def test_get_modify_put_round_trips(api):
    created = make_map(api)
    fetched = api.get(f"/maps/{created['id']}").get_json()["data"]
    fetched["title"] = "Москва"
    response = api.put(f"/maps/{created['id']}", json=fetched)
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["data"]["slug"] == "moskva"


def test_put_is_a_partial_update(api):
    created = make_map(
        api, title="Trip", description="Notes", public=True, style="dark", centerLat=10, zoom=3
    )
    time.sleep(0.005)
    updated = data_of(api.put(f"/maps/{created['id']}", json={"city": " Lyon "}))
    assert updated["city"] == "Lyon"
    unchanged = {k: v for k, v in created.items() if k not in {"city", "updatedAt"}}
    assert {name: updated[name] for name in unchanged} == unchanged
    assert get_map(api, created["id"]) == updated


def test_put_null_resets_nullable_numbers(api):
    created = make_map(api, centerLat=10.5, centerLng=-20.25, zoom=4)
    body = {"centerLat": None, "centerLng": None, "zoom": None}
    updated = data_of(api.put(f"/maps/{created['id']}", json=body))
    assert (updated["centerLat"], updated["centerLng"], updated["zoom"]) == (None, None, None)
    assert get_map(api, created["id"]) == updated


def test_empty_put_returns_the_map_unchanged(api):
    created = make_map(api, title="Kept", zoom=5)
    time.sleep(0.005)
    assert data_of(api.put(f"/maps/{created['id']}", json={})) == created
    assert get_map(api, created["id"]) == created


def test_put_with_the_same_values_keeps_updated_at(api):
    created = make_map(api, title="Same", centerLat=10, zoom=3, public=True)
    time.sleep(0.005)
    # The whole GET body, the title padded (trimmed to the same value), and
    # integers written as floats: nothing the GET returns changes.
    body = {**created, "title": "  Same  ", "centerLat": 10.0, "zoom": 3.0}
    assert data_of(api.put(f"/maps/{created['id']}", json=body)) == created
    assert get_map(api, created["id"]) == created


def test_every_change_moves_updated_at(api):
    created = make_map(api, centerLng=5)
    previous = created
    changes = [
        {"title": "Renamed"},
        {"description": "more"},
        {"country": "Peru"},
        {"city": "Lima"},
        {"public": True},
        {"allowCloning": False},
        {"style": "outdoors"},
        {"centerLat": -12.04},
        {"zoom": 7},
        {"centerLng": None},
    ]
    for change in changes:
        time.sleep(0.005)
        updated = data_of(api.put(f"/maps/{created['id']}", json=change))
        assert updated["createdAt"] == created["createdAt"]
        assert parse(updated["updatedAt"]) > parse(previous["updatedAt"]), change
        expected = {**previous, **change, "updatedAt": updated["updatedAt"]}
        if "title" in change:
            expected["slug"] = slugify(change["title"])
        assert updated == expected
        assert get_map(api, created["id"]) == updated
        previous = updated


def test_refused_update_changes_nothing(api):
    created = make_map(api, title="Before")
    response = api.put(f"/maps/{created['id']}", json={"title": "After", "zoom": 30})
    assert field_errors(response).keys() == {"zoom"}
    assert get_map(api, created["id"]) == created


# --- delete -----------------------------------------------------------------


def _fill(api, map_id):
    category = make_category(api, map_id)
    tag = make_tag(api, map_id)
    layer = make_layer(api, map_id)
    location = make_location(api, map_id, categoryId=category["id"], tagIds=[tag["id"]])
    response = api.put(
        f"/maps/{map_id}/locations/{location['id']}/layers", json={"layerIds": [layer["id"]]}
    )
    assert response.status_code == 200, response.get_json()
    return {"categories": category, "tags": tag, "layers": layer, "locations": location}


def test_delete_map_deletes_everything_in_it(api, app):
    doomed, kept = make_map(api, title="Doomed"), make_map(api, title="Kept")
    doomed_children, kept_children = _fill(api, doomed["id"]), _fill(api, kept["id"])

    response = api.delete(f"/maps/{doomed['id']}")
    assert data_of(response) == {"id": doomed["id"], "deleted": True}

    assert error_code(api.get(f"/maps/{doomed['id']}")) == "NOT_FOUND"
    for plural, child in doomed_children.items():
        response = api.get(f"/maps/{doomed['id']}/{plural}/{child['id']}")
        assert response.status_code == 404 and error_code(response) == "NOT_FOUND"
        assert error_code(api.get(f"/maps/{doomed['id']}/{plural}")) == "NOT_FOUND"
    assert [m["id"] for m in data_of(api.get("/maps"))["maps"]] == [kept["id"]]
    for plural, child in kept_children.items():
        assert data_of(api.get(f"/maps/{kept['id']}/{plural}/{child['id']}"))["id"] == child["id"]

    with app.app_context():
        for model in (Category, Tag, Layer, Location):
            rows = db.session.scalars(select(model.map_id)).all()
            assert rows == [kept["id"]], model.__name__
        assert db.session.scalars(select(LocationTag.location_id)).all() == [
            kept_children["locations"]["id"]
        ]
        assert db.session.execute(select(location_layers.c.location_id)).scalars().all() == [
            kept_children["locations"]["id"]
        ]
        assert db.session.scalars(select(Map.id)).all() == [kept["id"]]


def test_deleted_map_cannot_be_deleted_again(api):
    created = make_map(api)
    data_of(api.delete(f"/maps/{created['id']}"))
    response = api.delete(f"/maps/{created['id']}")
    assert response.status_code == 404 and error_code(response) == "NOT_FOUND"
    response = api.put(f"/maps/{created['id']}", json={"title": "Back"})
    assert response.status_code == 404 and error_code(response) == "NOT_FOUND"
    assert data_of(api.get("/maps"))["maps"] == []
