"""Routing: a fixed path segment is never read as an id, so a wrong method
on it answers 405 with the methods it really has, whatever route adds it."""

import pytest
from flask import Flask

from mapapi import create_app
from mapapi.http.auth import API_PREFIX
from mapapi.http.routing import fixed_segments

from .factories import ApiClient, make_map

OTHER_METHODS = ["OPTIONS", "GET", "HEAD", "PUT", "DELETE", "PATCH"]


def assert_method_not_allowed(response, allow: str) -> None:
    assert response.status_code == 405
    assert response.headers["Allow"] == allow
    if response.request.method != "HEAD":
        assert response.get_json() == {
            "error": {"code": "METHOD_NOT_ALLOWED", "message": "This method is not allowed here."}
        }


@pytest.mark.parametrize("method", OTHER_METHODS)
def test_bulk_path_allows_only_post(api, method):
    map_id = make_map(api)["id"]
    response = api.request(method, f"/maps/{map_id}/locations/bulk")
    assert_method_not_allowed(response, "POST")


def test_routing_answers_before_the_map_is_looked_up(api):
    response = api.get("/maps/AAAAAAAAAAAAAAAAAAAAAA/locations/bulk")
    assert_method_not_allowed(response, "POST")


def test_an_id_path_keeps_every_method_it_has(api):
    map_id = make_map(api)["id"]
    response = api.request("OPTIONS", f"/maps/{map_id}/locations/AAAAAAAAAAAAAAAAAAAAAA")
    assert_method_not_allowed(response, "DELETE, GET, HEAD, PUT")
    response = api.request("PATCH", f"/maps/{map_id}")
    assert_method_not_allowed(response, "DELETE, GET, HEAD, PUT")


def test_a_fixed_word_where_only_an_id_fits_is_an_unknown_path(api):
    map_id = make_map(api)["id"]
    for method in ("GET", "OPTIONS", "PUT"):
        response = api.request(method, f"/maps/{map_id}/locations/layers")
        assert response.status_code == 404, method
        assert response.get_json()["error"]["code"] == "NOT_FOUND"
        assert "Allow" not in response.headers


def sibling_fixed_paths(app: Flask):
    """(path with ids filled in, its methods) of every API route whose last
    segment is fixed where another route of the same prefix has a variable."""
    rules = [r for r in app.url_map.iter_rules() if r.rule.startswith(API_PREFIX + "/")]
    variable_prefixes = {r.rule.rsplit("/", 1)[0] for r in rules if r.rule.endswith(">")}
    for rule in rules:
        prefix, last = rule.rule.rsplit("/", 1)
        if "<" not in last and prefix in variable_prefixes:
            path = "/".join(
                "AAAAAAAAAAAAAAAAAAAAAA" if "<" in part else part for part in rule.rule.split("/")
            )
            yield path, rule.methods - {"OPTIONS"}


def test_every_fixed_segment_beside_an_id_answers_its_own_methods(app, api):
    found = list(sibling_fixed_paths(app))
    assert (f"{API_PREFIX}/maps/AAAAAAAAAAAAAAAAAAAAAA/locations/bulk", {"POST"}) in found
    for path, methods in found:
        allow = ", ".join(sorted(methods))
        for method in set(OTHER_METHODS) - methods:
            response = api.request(method, path.removeprefix(API_PREFIX))
            assert_method_not_allowed(response, allow)


def test_a_route_added_later_beside_an_id_gets_the_rule_without_a_change(app, app_config, key):
    """A new fixed segment (as a later feature adds) needs nothing but its route.

    ``app`` prepared the database and ``key``; a second app on it gets the new route.
    """
    later = create_app(app_config)
    later.add_url_rule(
        API_PREFIX + "/maps/<map_id>/locations/frobnicate",
        "frobnicate",
        lambda map_id: {"data": map_id},
        methods=["POST"],
    )
    assert "frobnicate" in fixed_segments(later.url_map)
    api = ApiClient(later.test_client(), key)
    map_id = make_map(api)["id"]
    for method in ("OPTIONS", "GET", "PUT", "DELETE"):
        response = api.request(method, f"/maps/{map_id}/locations/frobnicate")
        assert_method_not_allowed(response, "POST")
    assert api.post(f"/maps/{map_id}/locations/frobnicate").get_json() == {"data": map_id}
