"""Tenant isolation over every id-taking route the app has, found by walking its URL map.

Account A owns one of each resource; account B calls every route under
/api/v1 that takes ids, with every method it allows, using A's ids (and
mixes of its own map with A's children). Each call must answer 404
NOT_FOUND and leave every table of the database exactly as it was. A new
route is covered without editing this file, except that a write route needs
a body in ``BODIES`` and the expected number of routes must be raised: both
fail loudly otherwise.
"""

import itertools
import re

from sqlalchemy import Text, cast, select, update

from mapapi.extensions import db
from mapapi.http.auth import hash_secret
from mapapi.storage.models import ApiKey
from mapapi.timeutil import utcnow

from .factories import make_category, make_layer, make_location, make_map, make_tag
from .oauth_flow import connect

API = "/api/v1"
SKIPPED_METHODS = {"HEAD", "OPTIONS"}
WRITE_METHODS = {"POST", "PUT", "PATCH"}

#: (rule, method) pairs under /api/v1 whose path holds ids, as of docs/api.md.
#: A route added to the app changes this count: raise it, and give the route
#: a body below if it writes.
EXPECTED_ID_ROUTES = 37

#: The resource each URL variable names, and so whose id goes in it.
ID_KINDS = {
    "map_id": "map",
    "location_id": "location",
    "category_id": "category",
    "tag_id": "tag",
    "layer_id": "layer",
    "key_id": "key",
    "webhook_id": "webhook",
    "grant_id": "grant",
}

#: A body per write route that the owner's request would accept (checked at
#: the end of the test): if B's request got past the ownership check, it
#: would change something. ``ids`` holds A's ids by kind.
BODIES = {
    ("PUT", "/maps/<map_id>"): lambda ids: {"title": "Taken over", "public": True},
    ("POST", "/maps/<map_id>/locations"): lambda ids: {
        "name": "Intruder",
        "lat": 10,
        "lng": 20,
        "categoryId": ids["category"],
        "tagIds": [ids["tag"]],
    },
    ("POST", "/maps/<map_id>/locations/bulk"): lambda ids: {
        "locations": [{"name": "Intruder", "lat": 1, "lng": 2, "tagIds": [ids["tag"]]}] * 2
    },
    ("POST", "/maps/<map_id>/locations/import"): lambda ids: {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": [2, 1]},
                "properties": {
                    "name": "Intruder",
                    "tagIds": [ids["tag"]],
                    "layerIds": [ids["layer"]],
                },
            }
        ],
    },
    ("PUT", "/maps/<map_id>/locations/<location_id>"): lambda ids: {
        "name": "Taken over",
        "lat": 0,
        "categoryId": None,
        "tagIds": [],
        "properties": {"owner": "B"},
    },
    ("PUT", "/maps/<map_id>/locations/<location_id>/layers"): lambda ids: {"layerIds": []},
    ("POST", "/maps/<map_id>/categories"): lambda ids: {"name": "Intruder", "color": "#000000"},
    ("PUT", "/maps/<map_id>/categories/<category_id>"): lambda ids: {"name": "Taken over"},
    ("POST", "/maps/<map_id>/tags"): lambda ids: {"name": "Intruder"},
    ("PUT", "/maps/<map_id>/tags/<tag_id>"): lambda ids: {"name": "Taken over"},
    ("POST", "/maps/<map_id>/layers"): lambda ids: {"name": "Intruder", "order": 0},
    ("PUT", "/maps/<map_id>/layers/<layer_id>"): lambda ids: {"name": "Taken over", "order": 1},
    ("PUT", "/webhooks/<webhook_id>"): lambda ids: {"url": "https://93.184.215.14/b", "enabled": False},
    ("POST", "/webhooks/<webhook_id>/ping"): lambda ids: {},
    ("POST", "/maps/<map_id>/locations/upsert"): lambda ids: {
        "locations": [
            {"externalId": "intruder", "name": "Intruder", "lat": 1, "lng": 2},
            {"externalId": "layered", "name": "n", "lat": 0, "lng": 0, "layerIds": [ids["layer"]]},
        ]
    },
    # Last: the owner's own run of it deletes the location the others name.
    ("POST", "/maps/<map_id>/locations/bulk-delete"): lambda ids: {"ids": [ids["location"]]},
}


def dump_database(app, ignore=()) -> dict[str, list[tuple]]:
    """Every row of every table, each value as the database's own text, by primary key.

    Columns are cast to text in SQL, so the comparison sees what is stored
    (``1`` and ``1.0``, JSON key order and spacing), not what Python makes of
    it. ``ignore`` names ``(table, column)`` pairs to leave out.
    """
    dump = {}
    with app.app_context(), db.engine.connect() as connection:
        for table in db.metadata.sorted_tables:
            columns = [c for c in table.columns if (table.name, c.name) not in ignore]
            statement = select(*[cast(c, Text) for c in columns]).order_by(
                *table.primary_key.columns
            )
            dump[table.name] = [tuple(row) for row in connection.execute(statement)]
    return dump


def id_routes(app) -> list[tuple[str, str, tuple[str, ...]]]:
    """(method, rule without the prefix, its variables) for every id-taking API route."""
    found = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith(API + "/") or not rule.arguments:
            continue
        variables = tuple(re.findall(r"<(?:[^:<>]+:)?([^<>]+)>", rule.rule))
        assert set(variables) == set(rule.arguments), rule.rule
        for method in sorted(rule.methods - SKIPPED_METHODS):
            found.append((method, rule.rule[len(API) :], variables))
    return found


def fill(rule: str, ids: dict[str, str]) -> str:
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", lambda m: ids[ID_KINDS[m.group(1)]], rule)


def own_everything(api) -> dict[str, str]:
    """One map with a category, tag, layer and a location on all three, a key,
    a webhook endpoint and an OAuth grant."""
    map_id = make_map(api, title="A's map")["id"]
    category = make_category(api, map_id)["id"]
    tag = make_tag(api, map_id)["id"]
    layer = make_layer(api, map_id)["id"]
    make_layer(api, map_id, name="Second layer")
    location = make_location(api, map_id, categoryId=category, tagIds=[tag])["id"]
    response = api.put(f"/maps/{map_id}/locations/{location}/layers", json={"layerIds": [layer]})
    assert response.status_code == 200, response.get_json()
    key = api.created("/keys", {"name": "A's other key", "scope": "READ_ONLY"})["id"]
    webhook = api.created("/webhooks", {"url": "https://93.184.215.14/a", "events": ["*"]})["id"]
    connect(api.client, api.key)
    (grant,) = api.get("/grants").get_json()["data"]["grants"]
    return {
        "map": map_id,
        "category": category,
        "tag": tag,
        "layer": layer,
        "location": location,
        "key": key,
        "webhook": webhook,
        "grant": grant["id"],
    }


def pin_last_use(app, secret: str) -> None:
    """Record that B's key was used just now.

    A key's lastUsedAt is written on its first use and then at most once a
    minute (docs/api.md): B's own key, not A's data. Pinning it to now keeps
    that legitimate write out of the before/after comparison.
    """
    with app.app_context():
        db.session.execute(
            update(ApiKey)
            .where(ApiKey.secret_hash == hash_secret(secret))
            .values(last_used_at=utcnow())
        )
        db.session.commit()


def is_not_found(body) -> bool:
    """The contract's NOT_FOUND body, and nothing more."""
    return (
        isinstance(body, dict)
        and set(body) == {"error"}
        and set(body["error"]) == {"code", "message"}
        and body["error"]["code"] == "NOT_FOUND"
    )


def id_choices(variables, a_ids, b_ids):
    """Every assignment of A's or B's ids to ``variables`` with at least one of A's."""
    for owners in itertools.product("AB", repeat=len(variables)):
        if "A" in owners:
            yield (
                owners,
                {
                    ID_KINDS[v]: (a_ids if owner == "A" else b_ids)[ID_KINDS[v]]
                    for v, owner in zip(variables, owners, strict=True)
                },
            )


def test_every_id_route_answers_not_found_to_another_account_and_changes_nothing(
    app, api, other_api
):
    a_ids = own_everything(api)
    b_ids = own_everything(other_api)
    routes = id_routes(app)
    assert len(routes) == EXPECTED_ID_ROUTES, sorted((m, r) for m, r, _ in routes)
    assert {v for _, _, variables in routes for v in variables} == set(ID_KINDS)

    failures, without_body, calls = [], set(), 0
    for method, rule, variables in routes:
        body_for = BODIES.get((method, rule))
        if method in WRITE_METHODS and body_for is None:
            without_body.add(f"{method} {rule}")
        for owners, ids in id_choices(variables, a_ids, b_ids):
            body = body_for(a_ids) if body_for else ({} if method in WRITE_METHODS else None)
            pin_last_use(app, other_api.key)
            before = dump_database(app)
            kwargs = {} if body is None else {"json": body}
            response = other_api.request(method, fill(rule, ids), **kwargs)
            after = dump_database(app)
            calls += 1
            label = f"{method} {rule} with ids of {''.join(owners)}"
            if response.status_code != 404 or not is_not_found(response.get_json()):
                failures.append(
                    f"{label}: {response.status_code} {response.get_data(as_text=True)[:200]}"
                )
            if after != before:
                changed = [name for name in before if before[name] != after[name]]
                failures.append(f"{label}: tables changed: {changed}")

    assert not failures, "\n".join(failures)
    assert not without_body, f"write routes with no body in BODIES: {sorted(without_body)}"
    assert calls == sum(2 ** len(v) - 1 for _, _, v in routes)


def test_the_bodies_used_for_intrusion_would_be_accepted_from_the_owner(api):
    """A body the owner's own request refuses would prove nothing as B's."""
    ids = own_everything(api)
    for (method, rule), body_for in BODIES.items():
        response = api.request(method, fill(rule, ids), json=body_for(ids))
        assert response.status_code in (200, 201, 202), (method, rule, response.get_json())
