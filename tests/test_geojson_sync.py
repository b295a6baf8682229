"""GeoJSON and externalId: the export writes it, the import reads it back,
and ``import?upsert=true`` upserts Features by it (a GIS user's round trip)."""

import pytest

from .factories import error_code, make_layer, make_map, make_tag
from .helpers import data_of, validation_details
from .test_events import latest, read_feed
from .test_geojson import bulk, export, import_features, point_feature


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


def by_external_id(api, map_id) -> dict[str, dict]:
    listed = data_of(api.get(f"/maps/{map_id}/locations?pageSize=100"))["locations"]
    return {location["externalId"]: location for location in listed}


def test_the_export_writes_external_id_and_filters_by_it(api, map_id):
    bulk(api, map_id, {"name": "a", "externalId": "A1"}, {"name": "b"}, {"name": "c", "externalId": "C3"})
    features = export(api, map_id)["features"]
    assert [f["properties"]["externalId"] for f in features] == ["A1", None, "C3"]
    chosen = export(api, map_id, "externalId=C3&externalId=A1&q=a")["features"]
    assert [f["properties"]["name"] for f in chosen] == ["a"]  # ANDed with the other filters
    assert error_code(api.get(f"/maps/{map_id}/locations.geojson?externalId=")) == "VALIDATION_ERROR"


def test_the_list_takes_external_id_with_the_other_filters_and_sorts(api, map_id):
    bulk(
        api, map_id,
        {"name": "b", "externalId": "B"}, {"name": "a", "externalId": "A"}, {"name": "c", "externalId": "C"},
    )  # fmt: skip
    listed = data_of(api.get(f"/maps/{map_id}/locations?externalId=A&externalId=B&sort=name"))
    assert [loc["name"] for loc in listed["locations"]] == ["a", "b"]
    assert listed["pagination"]["total"] == 2
    boxed = data_of(api.get(f"/maps/{map_id}/locations?externalId=A&bbox=10,10,20,20"))
    assert boxed["locations"] == []


def test_the_import_reads_external_id_back(api, map_id):
    features = [point_feature("a", externalId=" X1 "), point_feature("b")]
    created = data_of(import_features(api, map_id, features), 201)
    assert [loc["externalId"] for loc in created["created"]] == ["X1", None]
    assert by_external_id(api, map_id)["X1"]["properties"] == {}  # a field, not a property


def test_the_import_refuses_a_taken_external_id_with_conflict(app, api, map_id):
    bulk(api, map_id, {"name": "a", "externalId": "X1"})
    response = import_features(api, map_id, [point_feature("b"), point_feature("c", externalId="X1")])
    assert response.status_code == 409 and error_code(response) == "CONFLICT"
    assert set(by_external_id(api, map_id)) == {"X1"}  # nothing created


def test_an_external_id_twice_in_one_import_is_an_error_on_the_later_feature(api, map_id):
    features = [point_feature("a", externalId="X"), point_feature("b", externalId="X")]
    for query in ("", "upsert=true"):
        response = import_features(api, map_id, features, query)
        assert error_code(response) == "VALIDATION_ERROR"
        assert set(validation_details(response)["features"]) == {"1"}
        assert "externalId" in validation_details(response)["features"]["1"]["properties"]
    assert by_external_id(api, map_id) == {}


def test_import_upsert_creates_updates_and_leaves_the_rest(api, map_id):
    layer = make_layer(api, map_id)["id"]
    tag = make_tag(api, map_id)["id"]
    (kept,) = bulk(
        api, map_id,
        {"name": "kept", "externalId": "K", "description": "d", "tagIds": [tag], "properties": {"a": 1}},
    )  # fmt: skip
    cursor = latest(api)
    # A Feature naming a location needs no name; the keys it leaves out keep their value.
    moved = {"type": "Feature", "geometry": {"type": "Point", "coordinates": [5, 6]},
             "properties": {"externalId": "K", "layerIds": [layer]}}  # fmt: skip
    response = import_features(api, map_id, [point_feature("new", externalId="N"), moved], "upsert=true")
    assert response.status_code == 200, response.get_json()
    answer = data_of(response)
    assert (answer["created"], answer["updated"], answer["unchanged"]) == (1, 1, 0)
    new, updated = answer["locations"]
    assert (new["name"], new["externalId"]) == ("new", "N")
    assert updated["id"] == kept["id"]
    assert (updated["name"], updated["description"], updated["tagIds"]) == ("kept", "d", [tag])
    assert updated["properties"] == {"a": 1}
    assert (updated["lng"], updated["lat"]) == (5, 6)
    assert [layer_["id"] for layer_ in updated["layers"]] == [layer]
    events = read_feed(api, after=cursor)
    assert sorted(e["type"] for e in events) == ["location.created", "location.updated"]
    # The same again changes nothing, records nothing.
    cursor = latest(api)
    again = data_of(import_features(api, map_id, [point_feature("new", externalId="N"), moved], "upsert=true"))
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, 2)
    assert again["locations"] == [new, updated]
    assert read_feed(api, after=cursor) == []


def test_import_upsert_needs_an_external_id_on_every_feature(api, map_id):
    features = [point_feature("a", externalId="A"), point_feature("b"), point_feature("c", externalId=None)]
    response = import_features(api, map_id, features, "upsert=true")
    assert error_code(response) == "VALIDATION_ERROR"
    details = validation_details(response)["features"]
    assert set(details) == {"1", "2"}
    assert all("externalId" in details[index]["properties"] for index in ("1", "2"))
    assert by_external_id(api, map_id) == {}


def test_a_new_feature_of_an_upsert_needs_a_name(api, map_id):
    nameless = {"type": "Feature", "geometry": {"type": "Point", "coordinates": [5, 6]},
                "properties": {"externalId": "NEW"}}  # fmt: skip
    response = import_features(api, map_id, [nameless], "upsert=true")
    assert validation_details(response)["features"]["0"]["properties"]["name"]


def test_an_unknown_layer_in_an_upsert_feature_is_named_under_its_properties(api, map_id):
    bulk(api, map_id, {"name": "a", "externalId": "A"})
    feature = point_feature("a", externalId="A", layerIds=["y" * 22])
    response = import_features(api, map_id, [feature], "upsert=true")
    assert list(validation_details(response)["features"]["0"]["properties"]) == ["layerIds"]


def test_export_edit_and_import_with_upsert_round_trip(api, map_id):
    layers = [make_layer(api, map_id, name=f"l{i}")["id"] for i in range(2)]
    tag = make_tag(api, map_id)["id"]
    bulk(
        api, map_id,
        *({"name": f"s{i}", "externalId": f"E{i}", "tagIds": [tag], "layerIds": layers[:1],
           "properties": {"n": i, "deep": {"x": [1, 2.5]}}} for i in range(5)),
    )  # fmt: skip
    before = by_external_id(api, map_id)
    exported = export(api, map_id)
    # Sent back untouched: nothing changes.
    answer = data_of(import_features(api, map_id, exported["features"], "upsert=true"))
    assert (answer["created"], answer["updated"], answer["unchanged"]) == (0, 0, 5)
    assert by_external_id(api, map_id) == before
    # Edited as in QGIS: one renamed, one moved to the other layer, one added.
    features = exported["features"]
    features[1]["properties"]["name"] = "renamed"
    features[3]["properties"]["layerIds"] = [layers[1]]
    features.append(point_feature("added", externalId="E9"))
    answer = data_of(import_features(api, map_id, features, "upsert=true"))
    assert (answer["created"], answer["updated"], answer["unchanged"]) == (1, 2, 3)
    after = by_external_id(api, map_id)
    assert after["E1"]["name"] == "renamed"
    assert [layer["id"] for layer in after["E3"]["layers"]] == [layers[1]]
    assert after["E9"]["name"] == "added"
    for external_id in ("E0", "E2", "E4"):
        assert after[external_id] == before[external_id]
    assert after["E1"]["id"] == before["E1"]["id"]
    assert export(api, map_id)["features"][-1]["properties"]["externalId"] == "E9"


def test_an_upserting_import_takes_1000_features_and_a_plain_one_100(api, map_id):
    features = [point_feature(f"n{n}", externalId=f"E{n}") for n in range(1001)]
    refused = import_features(api, map_id, features, "upsert=true")
    assert "1000" in validation_details(refused)["features"][0]
    answer = data_of(import_features(api, map_id, features[:1000], "upsert=true"))
    assert (answer["created"], len(answer["locations"])) == (1000, 1000)
    plain = import_features(api, map_id, features[:101])
    assert "100 " in validation_details(plain)["features"][0]
    assert data_of(import_features(api, map_id, [point_feature("x")] * 100), 201)["count"] == 100


def test_the_openapi_document_states_each_many_item_bound(api):
    document = api.client.get("/api/v1/openapi.json").get_json()
    schemas = document["components"]["schemas"]
    assert schemas["BulkInput"]["properties"]["locations"]["maxItems"] == 100
    assert schemas["UpsertInput"]["properties"]["locations"]["maxItems"] == 1000
    deleting = schemas["BulkDeleteInput"]["properties"]
    assert deleting["ids"]["maxItems"] == deleting["externalIds"]["maxItems"] == 1000
    features = schemas["ImportInput"]["properties"]["features"]
    assert features["maxItems"] == 1000
    assert "1 to 100 Features; with upsert=true, 1 to 1000" in features["description"]
