"""ETag, If-None-Match and If-Match on single resources."""

import threading
import time

import pytest
import requests

from .factories import (
    error_code,
    make_category,
    make_layer,
    make_location,
    make_map,
    make_tag,
)
from .helpers import TICK, data_of

TIMEOUT = 20
ETAG = r'^"[0-9a-f]{32}"$'


def resources(api) -> dict:
    """One of each kind, by name: (path, a PUT body that changes it)."""
    map_id = make_map(api)["id"]
    base = f"/maps/{map_id}"
    return {
        "map": (base, {"title": "Renamed"}),
        "location": (
            f"{base}/locations/{make_location(api, map_id, properties={'a': [1.5, 'é']})['id']}",
            {"name": "Moved"},
        ),
        "category": (
            f"{base}/categories/{make_category(api, map_id)['id']}",
            {"icon": "x"},
        ),
        "tag": (f"{base}/tags/{make_tag(api, map_id)['id']}", {"name": "other"}),
        "layer": (
            f"{base}/layers/{make_layer(api, map_id)['id']}",
            {"color": "#000000"},
        ),
    }


KINDS = ["map", "location", "category", "tag", "layer"]


@pytest.mark.parametrize("kind", KINDS)
def test_create_get_and_put_carry_the_etag_of_the_get_body(api, kind):
    import re

    path, change = resources(api)[kind]
    got = api.get(path)
    assert re.match(ETAG, got.headers["ETag"])
    assert api.get(path).headers["ETag"] == got.headers["ETag"]
    # A PUT that changes nothing keeps it; one that changes something moves it,
    # to what the next GET gives.
    same = api.put(path, json={})
    assert same.headers["ETag"] == got.headers["ETag"]
    time.sleep(TICK)
    changed = api.put(path, json=change)
    assert changed.status_code == 200
    assert changed.headers["ETag"] != got.headers["ETag"]
    assert api.get(path).headers["ETag"] == changed.headers["ETag"]


def test_a_creates_etag_is_the_one_a_get_then_gives(api):
    map_ = api.post("/maps", json={"title": "M"})
    map_id = map_.get_json()["data"]["id"]
    assert api.get(f"/maps/{map_id}").headers["ETag"] == map_.headers["ETag"]
    for path, body in [
        (
            "locations",
            {
                "name": "P",
                "lat": 1e-7,
                "lng": 2,
                "properties": {"z": 1e16, "a": "é\u2028"},
            },
        ),
        ("categories", {"name": "C", "color": "#abcdef"}),
        ("tags", {"name": "T"}),
        ("layers", {"name": "L2", "order": 0}),
    ]:
        created = api.post(f"/maps/{map_id}/{path}", json=body)
        assert created.status_code == 201, created.get_json()
        got = api.get(f"/maps/{map_id}/{path}/{created.get_json()['data']['id']}")
        assert got.headers["ETag"] == created.headers["ETag"], path


def test_side_effects_move_the_etag_too(api):
    map_id = make_map(api)["id"]
    first = make_layer(api, map_id, name="first")
    second = make_layer(api, map_id, name="second")
    tag = make_tag(api, map_id)
    location = make_location(api, map_id, tagIds=[tag["id"]])
    second_path = f"/maps/{map_id}/layers/{second['id']}"
    location_path = f"/maps/{map_id}/locations/{location['id']}"
    before_layer = api.get(second_path).headers["ETag"]
    before_location = api.get(location_path).headers["ETag"]
    time.sleep(TICK)
    # Moving the second layer first shifts the first; deleting the tag changes the location.
    assert (
        api.put(f"/maps/{map_id}/layers/{first['id']}", json={"order": 1}).status_code
        == 200
    )
    assert api.delete(f"/maps/{map_id}/tags/{tag['id']}").status_code == 200
    assert api.get(second_path).headers["ETag"] != before_layer
    assert api.get(location_path).headers["ETag"] != before_location


def test_lists_deletions_bulks_and_keys_carry_no_etag(api):
    map_id = make_map(api)["id"]
    location = make_location(api, map_id)
    answers = [
        api.get("/maps"),
        api.get(f"/maps/{map_id}/locations"),
        api.post(
            f"/maps/{map_id}/locations/bulk",
            json={"locations": [{"name": "a", "lat": 1, "lng": 1}]},
        ),
        api.post("/keys", json={"name": "k", "scope": "READ_ONLY"}),
        api.get("/keys"),
        api.delete(f"/maps/{map_id}/locations/{location['id']}"),
    ]
    for answer in answers:
        assert answer.status_code in (200, 201)
        assert "ETag" not in answer.headers, answer.request.path


# --- If-None-Match --------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_matching_if_none_match_answers_304_with_no_body(api, kind):
    path, change = resources(api)[kind]
    etag = api.get(path).headers["ETag"]
    for sent in (etag, f'"nope", {etag}', f"W/{etag}", "*"):
        unchanged = api.get(path, headers={"If-None-Match": sent})
        assert unchanged.status_code == 304, sent
        assert unchanged.get_data() == b""
        assert unchanged.headers["ETag"] == etag
        assert "Content-Type" not in unchanged.headers
        assert unchanged.headers["Cache-Control"] == "no-store"
        assert "X-RateLimit-Remaining" in unchanged.headers
    assert api.get(path, headers={"If-None-Match": '"nope"'}).status_code == 200
    api.put(path, json=change)
    assert api.get(path, headers={"If-None-Match": etag}).status_code == 200


def test_if_none_match_answers_after_authentication_and_ownership(
    api, other_api, client
):
    map_id = make_map(api)["id"]
    etag = api.get(f"/maps/{map_id}").headers["ETag"]
    stranger = other_api.get(f"/maps/{map_id}", headers={"If-None-Match": etag})
    assert stranger.status_code == 404 and error_code(stranger) == "NOT_FOUND"
    anonymous = client.get(f"/api/v1/maps/{map_id}", headers={"If-None-Match": etag})
    assert anonymous.status_code == 401


# --- If-Match --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_if_match_guards_put_and_delete(api, kind):
    path, change = resources(api)[kind]
    before = api.get(path)
    etag = before.headers["ETag"]
    for method, body in (("PUT", change), ("DELETE", None)):
        stale = api.request(method, path, json=body, headers={"If-Match": '"0123"'})
        assert stale.status_code == 412 and error_code(stale) == "PRECONDITION_FAILED"
        assert set(stale.get_json()["error"]) == {"code", "message"}
        weak = api.request(method, path, json=body, headers={"If-Match": f"W/{etag}"})
        assert weak.status_code == 412
        assert api.get(path).get_data() == before.get_data()  # nothing changed
    changed = api.put(path, json=change, headers={"If-Match": f'"other", {etag}'})
    assert changed.status_code == 200
    gone = api.delete(path, headers={"If-Match": changed.headers["ETag"]})
    assert gone.status_code == 200
    assert api.get(path).status_code == 404


def test_if_match_star_matches_any_current_version(api):
    map_id = make_map(api)["id"]
    assert (
        api.put(
            f"/maps/{map_id}", json={"title": "B"}, headers={"If-Match": "*"}
        ).status_code
        == 200
    )
    assert api.delete(f"/maps/{map_id}", headers={"If-Match": "*"}).status_code == 200
    missing = api.delete(f"/maps/{map_id}", headers={"If-Match": "*"})
    assert missing.status_code == 404


def test_if_match_guards_the_membership_put(api):
    map_id = make_map(api)["id"]
    layer = make_layer(api, map_id)
    location = make_location(api, map_id)
    path = f"/maps/{map_id}/locations/{location['id']}"
    etag = api.get(path).headers["ETag"]
    stale = api.put(
        path + "/layers", json={"layerIds": [layer["id"]]}, headers={"If-Match": '"x"'}
    )
    assert stale.status_code == 412
    assert data_of(api.get(path))["layers"] == []
    replaced = api.put(
        path + "/layers", json={"layerIds": [layer["id"]]}, headers={"If-Match": etag}
    )
    assert replaced.status_code == 200
    assert replaced.headers["ETag"] == api.get(path).headers["ETag"] != etag


def test_precondition_comes_after_ownership_and_before_validation(api, other_api):
    map_id = make_map(api)["id"]
    path = f"/maps/{map_id}"
    stranger = other_api.put(path, json={"title": "x"}, headers={"If-Match": '"x"'})
    assert stranger.status_code == 404
    unknown = api.put(
        f"/maps/{map_id}/tags/{'A' * 22}", json={}, headers={"If-Match": '"x"'}
    )
    assert unknown.status_code == 404
    invalid = api.put(path, json={"title": ""}, headers={"If-Match": '"x"'})
    assert invalid.status_code == 412
    etag = api.get(path).headers["ETag"]
    assert (
        api.put(path, json={"title": ""}, headers={"If-Match": etag}).status_code == 400
    )


def test_if_match_on_a_key_is_ignored(api):
    made = data_of(api.post("/keys", json={"name": "k", "scope": "READ_ONLY"}), 201)
    assert (
        api.delete(f"/keys/{made['id']}", headers={"If-Match": '"x"'}).status_code
        == 200
    )


def test_two_editors_racing_with_if_match_one_wins_every_time(api, live_server, key):
    map_id = make_map(api)["id"]
    location = make_location(api, map_id)
    url = f"{live_server}/api/v1/maps/{map_id}/locations/{location['id']}"
    auth = {"Authorization": f"Bearer {key}"}
    for round_ in range(25):
        etag = requests.get(url, headers=auth, timeout=TIMEOUT).headers["ETag"]
        headers = {**auth, "If-Match": etag}
        barrier = threading.Barrier(2)
        results = [None, None]

        def edit(
            index, headers=headers, barrier=barrier, results=results, round_=round_
        ):
            barrier.wait(timeout=10)
            results[index] = requests.put(
                url,
                json={"name": f"editor {index} round {round_}"},
                headers=headers,
                timeout=TIMEOUT,
            )

        threads = [threading.Thread(target=edit, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=TIMEOUT + 5)
        statuses = sorted(r.status_code for r in results)
        assert statuses == [200, 412], [r.text for r in results]
        winner = next(r for r in results if r.status_code == 200).json()["data"]["name"]
        assert (
            requests.get(url, headers=auth, timeout=TIMEOUT).json()["data"]["name"]
            == winner
        )


def test_an_empty_if_match_is_no_precondition(api):
    made = data_of(api.post("/maps", json={"title": "Kept"}), 201)
    answered = api.put(f"/maps/{made['id']}", json={"title": "Changed"}, headers={"If-Match": ""})
    assert data_of(answered)["title"] == "Changed"
    refused = api.put(f"/maps/{made['id']}", data="", headers={"If-Match": " "})
    assert refused.status_code == 400
