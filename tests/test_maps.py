"""Maps: create, read, list, update, delete."""

from .factories import error_code, make_map


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


def test_get_modify_put_round_trips(api):
    created = make_map(api)
    fetched = api.get(f"/maps/{created['id']}").get_json()["data"]
    fetched["title"] = "Москва"
    response = api.put(f"/maps/{created['id']}", json=fetched)
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["data"]["slug"] == "moskva"


def test_unknown_map_is_not_found(api):
    assert error_code(api.get("/maps/nope")) == "NOT_FOUND"
