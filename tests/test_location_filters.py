"""Filters and sort of the location list: the same answers on SQLite and PostgreSQL."""

import time
from urllib.parse import quote

import pytest

from mapapi.services import location_reads

from .factories import make_category, make_layer, make_location, make_map, make_tag
from .helpers import TICK, data_of, validation_details


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


@pytest.fixture(params=["keys read whole", "counted and paged"])
def both_reads(request, monkeypatch):
    """Each way a filtered page is read: the keys of a few matches at once,
    sorted in Python, or (past ``_FEW``, here 1) a count and an ordered page."""
    if request.param == "counted and paged":
        monkeypatch.setattr(location_reads, "_FEW", 1)


def listed(api, map_id, query: str = "", **kwargs) -> list[str]:
    """The names the list answers for ``query``, every page of it (pageSize 100)."""
    data = data_of(api.get(f"/maps/{map_id}/locations?pageSize=100&{query}", **kwargs))
    assert data["pagination"]["total"] == len(data["locations"])
    return [location["name"] for location in data["locations"]]


def bulk(api, map_id, *items) -> list[dict]:
    body = {"locations": [{"lat": 0, "lng": 0, **item} for item in items]}
    return api.created(f"/maps/{map_id}/locations/bulk", body)["created"]


def test_bbox_includes_its_edges_and_nothing_outside(api, map_id):
    bulk(
        api,
        map_id,
        {"name": "inside", "lat": 48.855, "lng": 2.295},
        {"name": "south-west corner", "lat": 48.85, "lng": 2.29},
        {"name": "north-east corner", "lat": 48.86, "lng": 2.30},
        {"name": "just north", "lat": 48.8600001, "lng": 2.295},
        {"name": "just east", "lat": 48.855, "lng": 2.3000001},
        {"name": "far", "lat": -33.9, "lng": 151.2},
    )
    assert listed(api, map_id, "bbox=2.29,48.85,2.30,48.86") == [
        "inside",
        "south-west corner",
        "north-east corner",
    ]
    assert listed(api, map_id, "bbox=2.295,48.855,2.295,48.855") == ["inside"]  # a point
    assert listed(api, map_id, "bbox=-180,-90,180,90") == listed(api, map_id)


@pytest.mark.usefixtures("both_reads")
def test_bbox_with_west_greater_than_east_crosses_the_antimeridian(api, map_id):
    bulk(
        api,
        map_id,
        {"name": "fiji", "lat": -17.7, "lng": 178.0},
        {"name": "samoa", "lat": -13.8, "lng": -172.1},
        {"name": "west edge", "lat": 0, "lng": 170},
        {"name": "east edge", "lat": 0, "lng": -170},
        {"name": "greenwich", "lat": 0, "lng": 0},
        {"name": "antimeridian", "lat": 0, "lng": 180},
        {"name": "too far south", "lat": -30, "lng": 179},
    )
    assert listed(api, map_id, "bbox=170,-20,-170,20") == [
        "fiji",
        "samoa",
        "west edge",
        "east edge",
        "antimeridian",
    ]


@pytest.mark.parametrize(
    "value",
    [
        "",
        "1,2,3",
        "1,2,3,4,5",
        "a,b,c,d",
        "1e1,0,20,1",
        "nan,0,1,1",
        "inf,0,1,1",
        " 1,2,3,4",
        "1,,3,4",
        "181,0,182,1",
        "0,-91,1,0",
        "0,10,1,5",
    ],
)
def test_a_bad_bbox_is_a_validation_error_keyed_bbox(api, map_id, value):
    details = validation_details(api.get(f"/maps/{map_id}/locations", query_string={"bbox": value}))
    assert list(details) == ["bbox"]


def test_q_matches_name_description_or_address_as_python_lower_cases_them(api, map_id):
    bulk(
        api,
        map_id,
        {"name": "ÉCOLE Ω"},
        {"name": "x", "description": "Near the ÉCOLE"},
        {"name": "y", "address": "1 rue de l'École"},
        {"name": "ecole without accent"},
        {"name": "ΣΊΣΥΦΟΣ"},  # Python lower-cases a final sigma as one: σίσυφος
        {"name": "İstanbul"},
    )
    assert listed(api, map_id, "q=école") == ["ÉCOLE Ω", "x", "y"]
    assert listed(api, map_id, "q=%C3%89cole%20%CF%89") == ["ÉCOLE Ω"]  # "École ω"
    assert listed(api, map_id, "q=ΦΟΣ") == ["ΣΊΣΥΦΟΣ"]  # "φος", as Python has it
    assert listed(api, map_id, "q=φοσ") == []
    assert listed(api, map_id, "q=" + "İstanbul".lower()) == ["İstanbul"]
    assert listed(api, map_id, "q=%20%20ECOLE%20") == ["ecole without accent"]  # trimmed


def test_q_takes_like_wildcards_literally(api, map_id):
    bulk(
        api,
        map_id,
        {"name": "100% pure"},
        {"name": "a_b"},
        {"name": "axb"},
        {"name": "back\\slash"},
    )
    assert listed(api, map_id, "q=0%25") == ["100% pure"]
    assert listed(api, map_id, "q=_") == ["a_b"]
    assert listed(api, map_id, "q=%5C") == ["back\\slash"]


def test_q_follows_edits_of_the_searched_fields(api, map_id):
    (location,) = bulk(api, map_id, {"name": "Old name"})
    assert listed(api, map_id, "q=new") == []
    response = api.put(f"/maps/{map_id}/locations/{location['id']}", json={"name": "NEW NAME"})
    assert response.status_code == 200
    assert listed(api, map_id, "q=new%20name") == ["NEW NAME"]
    assert listed(api, map_id, "q=old") == []


def test_q_and_the_name_sort_follow_an_upsert_of_the_searched_fields(api, map_id):
    bulk(api, map_id, {"name": "Zed", "externalId": "e1"}, {"name": "Middle"})
    response = api.post(
        f"/maps/{map_id}/locations/upsert",
        json={"locations": [{"externalId": "e1", "name": "ALPHA", "address": "Rue Neuve"}]},
    )
    assert response.status_code == 200, response.get_json()
    assert listed(api, map_id, "q=alpha") == ["ALPHA"]
    assert listed(api, map_id, "q=neuve") == ["ALPHA"]
    assert listed(api, map_id, "q=zed") == []
    assert listed(api, map_id, "sort=name") == ["ALPHA", "Middle"]


@pytest.mark.parametrize("value", ["", "   ", "x" * 201, "a\x00b"])
def test_a_bad_q_is_a_validation_error_keyed_q(api, map_id, value):
    details = validation_details(api.get(f"/maps/{map_id}/locations", query_string={"q": value}))
    assert list(details) == ["q"]


def test_category_tag_and_layer_filters_combine_with_and(api, map_id):
    food, shop = make_category(api, map_id)["id"], make_category(api, map_id, name="Shop")["id"]
    vegan, cheap = (
        make_tag(api, map_id, name="vegan")["id"],
        make_tag(api, map_id, name="cheap")["id"],
    )
    layer = make_layer(api, map_id)["id"]
    created = bulk(
        api,
        map_id,
        {"name": "both tags", "tagIds": [cheap, vegan], "categoryId": food},
        {"name": "vegan only", "tagIds": [vegan], "categoryId": shop},
        {"name": "cheap only", "tagIds": [cheap]},
        {"name": "none"},
    )
    for location in created[1:3]:
        response = api.put(
            f"/maps/{map_id}/locations/{location['id']}/layers", json={"layerIds": [layer]}
        )
        assert response.status_code == 200
    assert listed(api, map_id, f"tagId={vegan}") == ["both tags", "vegan only"]
    assert listed(api, map_id, f"tagId={vegan}&tagId={cheap}") == ["both tags"]
    assert listed(api, map_id, f"tagId={vegan}&tagId={vegan}") == ["both tags", "vegan only"]
    assert listed(api, map_id, f"categoryId={food}") == ["both tags"]
    assert listed(api, map_id, f"layerId={layer}") == ["vegan only", "cheap only"]
    assert listed(api, map_id, f"layerId={layer}&tagId={cheap}") == ["cheap only"]
    assert listed(api, map_id, f"layerId={layer}&categoryId={shop}&q=VEGAN") == ["vegan only"]


def test_an_id_that_names_nothing_on_this_map_matches_nothing(api, other_api, map_id):
    make_location(api, map_id)
    other_map = make_map(other_api)["id"]
    foreign_tag = make_tag(other_api, other_map)["id"]
    for query in (
        f"tagId={foreign_tag}",
        "categoryId=nope",
        "layerId=AAAAAAAAAAAAAAAAAAAAAA",
        "tagId=%00",
        "categoryId=%00",
    ):
        data = data_of(api.get(f"/maps/{map_id}/locations?{query}"))
        assert data == {
            "locations": [],
            "pagination": {"total": 0, "page": 1, "pageSize": 50, "totalPages": 0},
        }, query


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("categoryId=", "categoryId"),
        ("layerId=", "layerId"),
        ("tagId=", "tagId"),
        ("&".join(f"tagId=t{n}" for n in range(11)), "tagId"),
        ("updatedSince=yesterday", "updatedSince"),
        ("updatedSince=2026-01-01", "updatedSince"),
        ("sort=title", "sort"),
        ("sort=%20name", "sort"),
        ("sort=", "sort"),
    ],
)
def test_bad_filter_values_are_validation_errors_keyed_by_parameter(api, map_id, query, field):
    details = validation_details(api.get(f"/maps/{map_id}/locations?{query}"))
    assert list(details) == [field]


def test_ten_tag_filters_are_allowed(api, map_id):
    tags = [make_tag(api, map_id, name=f"t{n}")["id"] for n in range(10)]
    bulk(api, map_id, {"name": "all ten", "tagIds": tags}, {"name": "nine", "tagIds": tags[:9]})
    assert listed(api, map_id, "&".join(f"tagId={tag}" for tag in tags)) == ["all ten"]


@pytest.mark.usefixtures("both_reads")
def test_updated_since_is_at_or_after(api, map_id):
    (first,) = bulk(api, map_id, {"name": "first"})
    time.sleep(TICK)
    (second,) = bulk(api, map_id, {"name": "second"})
    since = second["updatedAt"]
    assert listed(api, map_id, "updatedSince=" + quote(since)) == ["second"]
    assert listed(api, map_id, "updatedSince=" + quote(first["updatedAt"])) == [
        "first",
        "second",
    ]
    offset = since[:-1] + "+00:00"
    assert listed(api, map_id, "updatedSince=" + quote(offset)) == ["second"]
    time.sleep(TICK)
    response = api.put(f"/maps/{map_id}/locations/{first['id']}", json={"address": "moved"})
    assert response.status_code == 200
    assert listed(api, map_id, "updatedSince=" + quote(since)) == ["first", "second"]


@pytest.mark.usefixtures("both_reads")
def test_sorts_compare_lower_cased_names_by_code_point_and_keep_creation_order_on_ties(api, map_id):
    names = ["b", "A", "a", "B", "é", "Z", "ä", "_x"]
    created = bulk(api, map_id, *({"name": name} for name in names))
    # "_" (U+005F) < "a" < "b" < "z" < "ä" (U+00E4) < "é" (U+00E9), by code point.
    assert listed(api, map_id, "sort=name") == ["_x", "A", "a", "b", "B", "Z", "ä", "é"]
    assert listed(api, map_id, "sort=-name") == ["é", "ä", "Z", "b", "B", "A", "a", "_x"]
    assert listed(api, map_id, "sort=createdAt") == names
    assert listed(api, map_id, "sort=-createdAt") == names[::-1]
    time.sleep(TICK)
    response = api.put(f"/maps/{map_id}/locations/{created[1]['id']}", json={"name": "A2"})
    assert response.status_code == 200
    rest = [name for name in names if name != "A"]
    assert listed(api, map_id, "sort=updatedAt") == [*rest, "A2"]
    assert listed(api, map_id, "sort=-updatedAt") == ["A2", *rest]


@pytest.mark.usefixtures("both_reads")
def test_filtered_pages_count_only_the_matches(api, map_id):
    bulk(api, map_id, *({"name": f"odd {n}" if n % 2 else f"even {n}"} for n in range(25)))
    data = data_of(api.get(f"/maps/{map_id}/locations?q=odd&pageSize=5&page=3&sort=-createdAt"))
    assert data["pagination"] == {"total": 12, "page": 3, "pageSize": 5, "totalPages": 3}
    assert [location["name"] for location in data["locations"]] == ["odd 3", "odd 1"]
    past = data_of(api.get(f"/maps/{map_id}/locations?q=odd&page=9"))
    assert past["locations"] == [] and past["pagination"]["total"] == 12


@pytest.mark.usefixtures("both_reads")
def test_filtered_locations_are_dumped_as_unfiltered_ones(api, map_id):
    tag = make_tag(api, map_id)["id"]
    layers = [make_layer(api, map_id, name=f"l{n}")["id"] for n in range(2)]
    bulk(
        api,
        map_id,
        *(
            {"name": f"n{n}", "tagIds": [tag], "properties": {"n": n, "big": 2**70}}
            for n in range(3)
        ),
    )
    plain = data_of(api.get(f"/maps/{map_id}/locations"))["locations"]
    for location in plain:
        response = api.put(
            f"/maps/{map_id}/locations/{location['id']}/layers", json={"layerIds": layers[::-1]}
        )
        assert response.status_code == 200
    plain = data_of(api.get(f"/maps/{map_id}/locations"))["locations"]
    assert [layer["order"] for layer in plain[0]["layers"]] == [0, 1]
    filtered = data_of(api.get(f"/maps/{map_id}/locations?tagId={tag}&sort=-name"))["locations"]
    assert filtered == plain[::-1]


def test_filters_read_only_the_map_in_the_path(api, map_id):
    other = make_map(api)["id"]
    make_location(api, other, name="elsewhere", lat=10, lng=10)
    make_location(api, map_id, name="here", lat=10, lng=10)
    assert listed(api, map_id, "bbox=9,9,11,11&q=e") == ["here"]


def test_filtered_list_costs_the_same_statements_for_one_or_many(api, map_id, statements):
    tag = make_tag(api, map_id)["id"]
    layer = make_layer(api, map_id)["id"]
    query = f"/maps/{map_id}/locations?tagId={tag}&layerId={layer}&sort=name&pageSize=100"

    def cost() -> int:
        assert api.get("/keys").status_code == 200  # absorbs the key's lastUsedAt write
        statements.reset()
        assert api.get(query).status_code == 200
        return statements.count

    created = bulk(api, map_id, {"name": "one", "tagIds": [tag]})
    api.put(f"/maps/{map_id}/locations/{created[0]['id']}/layers", json={"layerIds": [layer]})
    one = cost()
    for location in bulk(api, map_id, *({"name": f"n{n}", "tagIds": [tag]} for n in range(99))):
        api.put(f"/maps/{map_id}/locations/{location['id']}/layers", json={"layerIds": [layer]})
    assert len(listed(api, map_id, f"tagId={tag}&layerId={layer}")) == 100
    assert cost() == one <= 12
