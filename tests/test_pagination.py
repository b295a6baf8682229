"""Every list endpoint: one shape, page/pageSize rules, stable order."""

import math

import pytest

from .factories import make_category, make_layer, make_location, make_map, make_tag
from .helpers import data_of, outcome

LISTS = ["maps", "locations", "categories", "tags", "layers", "keys"]
MALFORMED = ["-1", "+1", " 1", "1 ", "1.0", "1e2", "0x10", "abc", "", "١", "１", "1,2"]
BAD_VALUES = {
    "page": ["0", "00", *MALFORMED],
    "pageSize": ["0", "101", "1000", str(10**30), *MALFORMED],
}


class Listing:
    """One list endpoint of ``api``: its path, how to add an item, and the order."""

    def __init__(self, api, plural):
        self.api, self.plural = api, plural
        self.map_id = None if plural in ("maps", "keys") else make_map(api)["id"]
        self.path = f"/maps/{self.map_id}/{plural}" if self.map_id else f"/{plural}"
        # The key the fixture made is already on the list.
        self.ids = [key["id"] for key in self.page()["keys"]] if plural == "keys" else []
        self.created = 0

    def add(self, count=1):
        for _ in range(count):
            self.created += 1
            n = self.created
            api, map_id = self.api, self.map_id
            item = {
                "maps": lambda: make_map(api, title=f"Map {n}"),
                "locations": lambda: make_location(api, map_id, name=f"Spot {n}"),
                "categories": lambda: make_category(api, map_id, name=f"Category {n}"),
                "tags": lambda: make_tag(api, map_id, name=f"tag {n}"),
                "layers": lambda: make_layer(api, map_id, name=f"Layer {n}"),
                "keys": lambda: api.created("/keys", {"name": f"key {n}", "scope": "READ_ONLY"}),
            }[self.plural]()
            if self.plural == "keys":
                self.ids.insert(0, item["id"])  # newest first
            else:
                self.ids.append(item["id"])

    def get(self, **query):
        return self.api.get(self.path, query_string=query)

    def page(self, **query) -> dict:
        body = data_of(self.get(**query))
        assert set(body) == {self.plural, "pagination"}, body
        assert set(body["pagination"]) == {"total", "page", "pageSize", "totalPages"}
        return body


@pytest.fixture(params=LISTS)
def listing(request, api):
    return Listing(api, request.param)


def test_list_shape_and_defaults(listing):
    listing.add(3)
    body = listing.page()
    assert [item["id"] for item in body[listing.plural]] == listing.ids
    total = len(listing.ids)
    assert body["pagination"] == {"total": total, "page": 1, "pageSize": 50, "totalPages": 1}


def test_empty_lists_have_no_pages(api):
    for plural in LISTS[:-1]:  # the caller's key is always on /keys
        listing = Listing(api, plural)
        assert listing.page() == {
            plural: [],
            "pagination": {"total": 0, "page": 1, "pageSize": 50, "totalPages": 0},
        }
        assert listing.page(page="3", pageSize="10") == {
            plural: [],
            "pagination": {"total": 0, "page": 3, "pageSize": 10, "totalPages": 0},
        }


def test_pages_split_the_items_in_stable_order(listing):
    listing.add(5)
    total = len(listing.ids)
    pages = math.ceil(total / 2)
    seen = []
    for page in range(1, pages + 1):
        body = listing.page(page=str(page), pageSize="2")
        items = [item["id"] for item in body[listing.plural]]
        assert items == listing.ids[(page - 1) * 2 : page * 2]
        assert body["pagination"] == {
            "total": total,
            "page": page,
            "pageSize": 2,
            "totalPages": pages,
        }
        seen += items
    assert seen == listing.ids
    # Asking again gives the same pages.
    again = listing.page(page="2", pageSize="2")
    assert [item["id"] for item in again[listing.plural]] == listing.ids[2:4]


def test_total_pages_is_the_ceiling(api):
    listing = Listing(api, "tags")
    listing.add(5)
    for page_size, pages in [(1, 5), (2, 3), (3, 2), (4, 2), (5, 1), (6, 1), (100, 1)]:
        body = listing.page(pageSize=str(page_size))
        assert body["pagination"] == {
            "total": 5,
            "page": 1,
            "pageSize": page_size,
            "totalPages": pages,
        }
        assert [tag["id"] for tag in body["tags"]] == listing.ids[:page_size]


def test_a_page_past_the_end_is_empty_with_the_true_total(listing):
    listing.add(5)
    total = len(listing.ids)
    for page in [4, 50, 10**30]:
        for page_size in [2, 100]:
            body = listing.page(page=str(page), pageSize=str(page_size))
            assert body == {
                listing.plural: [],
                "pagination": {
                    "total": total,
                    "page": page,
                    "pageSize": page_size,
                    "totalPages": math.ceil(total / page_size),
                },
            }


def test_default_page_size_is_fifty(api):
    listing = Listing(api, "locations")
    bulk = [{"name": f"Spot {n}", "lat": 1, "lng": 2} for n in range(51)]
    created = api.created(f"/maps/{listing.map_id}/locations/bulk", {"locations": bulk})["created"]
    ids = [location["id"] for location in created]
    first, second = listing.page(), listing.page(page="2")
    assert [item["id"] for item in first["locations"]] == ids[:50]
    assert [item["id"] for item in second["locations"]] == ids[50:]
    assert first["pagination"] == {"total": 51, "page": 1, "pageSize": 50, "totalPages": 2}
    assert second["pagination"] == {"total": 51, "page": 2, "pageSize": 50, "totalPages": 2}


def test_page_size_of_one_hundred_is_the_largest(api):
    listing = Listing(api, "locations")
    bulk = [{"name": f"Spot {n}", "lat": 1, "lng": 2} for n in range(100)]
    api.created(f"/maps/{listing.map_id}/locations/bulk", {"locations": bulk})
    listing.add()
    body = listing.page(pageSize="100")
    assert len(body["locations"]) == 100
    assert body["pagination"] == {"total": 101, "page": 1, "pageSize": 100, "totalPages": 2}
    assert outcome(listing.get(pageSize="101")) == (400, "VALIDATION_ERROR", ["pageSize"])


@pytest.mark.parametrize("name", BAD_VALUES)
def test_bad_page_parameters_are_validation_errors_naming_them(listing, name):
    listing.add()
    values = BAD_VALUES[name]
    outcomes = {value: outcome(listing.get(**{name: value})) for value in values}
    assert outcomes == {value: (400, "VALIDATION_ERROR", [name]) for value in values}
    both = listing.get(page="0", pageSize="abc")
    assert outcome(both) == (400, "VALIDATION_ERROR", ["page", "pageSize"])


def test_leading_zeros_are_still_decimal_digits(listing):
    listing.add(3)
    body = listing.page(page="002", pageSize="02")
    assert [item["id"] for item in body[listing.plural]] == listing.ids[2:4]
    assert body["pagination"]["page"] == 2 and body["pagination"]["pageSize"] == 2


def test_unknown_query_parameters_are_ignored(listing):
    listing.add(2)
    body = listing.page(order="desc", page_size="1", limit="1", offset="1", PAGE="9")
    assert [item["id"] for item in body[listing.plural]] == listing.ids
    total = len(listing.ids)
    assert body["pagination"] == {"total": total, "page": 1, "pageSize": 50, "totalPages": 1}


def test_lists_of_another_accounts_map_are_not_found(api, other_api):
    for plural in ["locations", "categories", "tags", "layers"]:
        theirs = Listing(other_api, plural)
        theirs.add()
        assert outcome(api.get(theirs.path)) == (404, "NOT_FOUND", []), plural
        # The map's ownership is checked before the query is validated.
        response = api.get(theirs.path, query_string={"page": "0"})
        assert outcome(response) == (404, "NOT_FOUND", []), plural
        assert [item["id"] for item in theirs.page()[plural]] == theirs.ids


def test_account_lists_hold_only_the_callers_items(api, other_api):
    for plural in ["maps", "keys"]:
        mine, theirs = Listing(api, plural), Listing(other_api, plural)
        mine.add(2)
        theirs.add(3)
        assert [item["id"] for item in mine.page()[plural]] == mine.ids
        assert mine.page()["pagination"]["total"] == len(mine.ids)
        assert [item["id"] for item in theirs.page()[plural]] == theirs.ids
