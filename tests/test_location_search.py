"""``q`` through its search index (SQLite's FTS5 table, PostgreSQL's trigram
indexes): the answers are those of the contract's rule, whatever the text,
and the index follows every write."""

import sqlite3

import pytest
from sqlalchemy import event, make_url, text

from mapapi.extensions import db

from . import backends
from .factories import make_map
from .helpers import data_of
from .test_location_filters import bulk

SEARCHED = ("name", "description", "address")

#: Text that trips up a search index: case rules beyond ASCII, characters
#: that Python lower-cases into two, FTS5's query syntax, LIKE's wildcards.
TRICKY_LOCATIONS = [
    {"name": "İstanbul Kebap", "address": "İSTİKLAL Cd. 5"},
    {"name": "istanbul bazaar", "description": "DIŞ KAPI"},
    {"name": "Straße der Pariser Kommune", "description": "STRASSE 1"},
    {"name": "ΟΔΥΣΣΕΥΣ", "description": "Ὀδυσσεύς and Σίσυφος"},
    {"name": "🍕 Pizza Party 🎉", "description": "👨‍👩‍👧 family table"},
    {"name": 'Say "hi" OR NEAR(a b)', "description": "a*b AND NOT c", "address": "col:val ^st"},
    {"name": "100% pure_cotton \\ shop", "description": "{braces} (parens) + - ."},
    {"name": "Kelvin \u212a", "description": "ǅungla", "address": "ﬁne ligature"},
    {"name": "plain"},
    # Every trigram of "old mill", though not "old mill" itself.
    {"name": "Old Harbour", "description": "by the mill"},
]
TRICKY_QUERIES = [
    # Shorter than a trigram (also once lower-cased, or only then)
    "i", "İ", "is", "ß", "ẞ", "ss", "σ", "ς", "🍕", "🎉", '"', "*", "%", "_", "\\", "k",
    "ǆ", "^", "(", "-", " or ",
    # A trigram or more
    "ist", "İst", "İSTANBUL", "i\u0307st", "stanbul", "diş", "DIŞ", "dis",
    "straße", "STRASSE", "ẞE D", "asse", "ΣΣΕ", "ευς", "ευσ", "ὀδυ", "ΣΊΣΥΦΟΣ", "σίσυφος",
    "🍕 p", "🍕 🎉", "y 🎉", "👨‍👩‍👧", "\u200d👩\u200d", "👩",
    '""', '"hi"', 'say "hi', '" OR "', "OR", "NEAR", "near(a", "NEAR(a b)", "a*b", "b*",
    "AND NOT", "NOT c", "col:val", "col:", "^st", "{braces}", "(parens) +", "- .",
    "0% p", "e_c", '" OR N', "e\\ s", " \\ ", "kelvin k", "ǆun", "ǅUN", "ﬁne", "fine", "plain",
    "old mill", "old harbour", "r by",
    "x" * 200, "no such text",
]  # fmt: skip


@pytest.fixture
def map_id(api):
    return make_map(api)["id"]


def searched(api, map_id, q: str) -> list[str]:
    """The names the list answers for ``q`` (one page of up to 100)."""
    data = data_of(api.get(f"/maps/{map_id}/locations", query_string={"q": q, "pageSize": 100}))
    assert data["pagination"]["total"] == len(data["locations"])
    return [location["name"] for location in data["locations"]]


def by_the_rule(api, map_id, q: str) -> list[str]:
    """The contract's answer, computed here from the unfiltered list: ``q``
    trimmed and lower-cased is in a lower-cased searched field."""
    everything = data_of(api.get(f"/maps/{map_id}/locations?pageSize=100"))["locations"]
    needle = q.strip().lower()
    return [
        location["name"]
        for location in everything
        if any(needle in location[field].lower() for field in SEARCHED)
    ]


def differences(api, map_id, queries) -> dict:
    """``{q: (answered, expected)}`` for each q whose answer breaks the rule."""
    found = {}
    for q in queries:
        answered, expected = searched(api, map_id, q), by_the_rule(api, map_id, q)
        if answered != expected:
            found[q] = (answered, expected)
    return found


def assert_search_table_in_step(app) -> None:
    """On SQLite: the search table holds each location's lower-cased copies
    under its pk, nothing else, and its index agrees with its rows."""
    with app.app_context():
        if db.engine.dialect.name != "sqlite":
            return
        with db.engine.begin() as connection:
            indexed = connection.execute(_INDEXED).all()
            stored = connection.execute(_STORED).all()
            # FTS5 raises SQLITE_CORRUPT_VTAB when its index and rows disagree.
            connection.execute(_INTEGRITY_CHECK)
    assert [tuple(row) for row in indexed] == [tuple(row) for row in stored]


_INDEXED = text(
    "SELECT rowid, name_folded, description_folded, address_folded"
    " FROM location_search ORDER BY rowid"
)
_STORED = text(
    "SELECT pk, name_folded, description_folded, address_folded FROM locations ORDER BY pk"
)
_INTEGRITY_CHECK = text("INSERT INTO location_search (location_search) VALUES ('integrity-check')")


def test_q_answers_by_the_rule_whatever_the_text(app, api, map_id):
    bulk(api, map_id, *TRICKY_LOCATIONS)
    assert differences(api, map_id, TRICKY_QUERIES) == {}
    assert_search_table_in_step(app)
    # The rule's own corners, spelled out.
    assert searched(api, map_id, "İst") == ["İstanbul Kebap"]  # "i̇st": i, combining dot, s, t
    assert searched(api, map_id, "ist") == ["istanbul bazaar"]
    assert searched(api, map_id, "ΣΊΣΥΦΟΣ") == ["ΟΔΥΣΣΕΥΣ"]  # final sigma, as Python has it
    assert searched(api, map_id, '" OR N') == ['Say "hi" OR NEAR(a b)']
    assert searched(api, map_id, "ﬁne") == ["Kelvin \u212a"]
    assert searched(api, map_id, "fine") == []  # no compatibility folding
    assert searched(api, map_id, "old mill") == []


def test_q_follows_every_write_of_the_searched_fields(app, api, map_id):
    first, second, third, fourth = bulk(
        api,
        map_id,
        {"name": "Green Bench", "description": "by the river", "externalId": "e1"},
        {"name": "Old Mill", "address": "1 River Road"},
        {"name": "Riverside Café"},
        {"name": "Market", "description": "riverbank stalls", "externalId": "e4"},
    )
    queries = ["river", "RIVER ROAD", "bench", "mill", "café", "new", "ri"]
    assert differences(api, map_id, queries) == {}
    path = f"/maps/{map_id}/locations"
    steps = [
        lambda: api.put(f"{path}/{first['id']}", json={"name": "New Bench", "description": ""}),
        lambda: api.put(f"{path}/{second['id']}", json={"address": "2 Mill Lane"}),
        lambda: api.put(f"{path}/{second['id']}", json={"lat": 1}),  # no searched field
        lambda: api.post(
            f"{path}/upsert",
            json={"locations": [{"externalId": "e4", "name": "New Market", "description": "RIVER"}]},
        ),
        lambda: api.delete(f"{path}/{third['id']}"),
        lambda: api.post(f"{path}/bulk-delete", json={"ids": [fourth["id"]]}),
        lambda: api.post(
            f"{path}/bulk", json={"locations": [{"name": "Riverboat", "lat": 0, "lng": 0}]}
        ),
    ]
    for number, step in enumerate(steps):
        assert step().status_code in (200, 201), number
        assert differences(api, map_id, queries) == {}, number
        assert_search_table_in_step(app)
    assert searched(api, map_id, "new") == ["New Bench"]  # New Market went with its delete
    assert searched(api, map_id, "river") == ["Riverboat"]


def test_a_deleted_map_takes_its_locations_out_of_the_index(app, api):
    kept, deleted = make_map(api)["id"], make_map(api)["id"]
    bulk(api, kept, {"name": "Harbour Light"}, {"name": "Harbour Wall"})
    bulk(api, deleted, *({"name": f"Harbour {n}"} for n in range(5)))
    assert api.delete(f"/maps/{deleted}").status_code == 200
    assert_search_table_in_step(app)
    # The deleted map's locations had the highest pks: SQLite gives them
    # out again, and the index must not hold them any more.
    again = make_map(api)["id"]
    bulk(api, again, {"name": "Harbour Inn"}, {"name": "Lighthouse"})
    assert_search_table_in_step(app)
    assert searched(api, kept, "harbour") == ["Harbour Light", "Harbour Wall"]
    assert searched(api, again, "harbour") == ["Harbour Inn"]
    assert searched(api, again, "light") == ["Lighthouse"]


@pytest.mark.skipif(backends.on_postgres(), reason="SQLite's VACUUM")
def test_the_index_stays_paired_with_its_locations_after_vacuum(app, api, map_id):
    created = bulk(
        api, map_id, *({"name": f"Spot {n}", "description": f"bench {n}"} for n in range(6))
    )
    for location in created[1:5:2]:
        assert api.delete(f"/maps/{map_id}/locations/{location['id']}").status_code == 200
    with app.app_context():
        path = make_url(db.engine.url).database
        db.engine.dispose()
    vacuumed = sqlite3.connect(path)
    vacuumed.execute("VACUUM")
    vacuumed.close()
    assert_search_table_in_step(app)
    assert searched(api, map_id, "bench 5") == ["Spot 5"]
    assert differences(api, map_id, ["spot", "bench 4", "ench 2"]) == {}


def sent_statements(app, api, path: str, query_string: dict) -> list[tuple]:
    """The statements (and their parameters) the app sends for one GET,
    its streamed body read to the end."""
    sent = []

    def record(_connection, _cursor, statement, parameters, _context, _executemany):
        sent.append((statement, parameters))

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        response = api.get(path, query_string=query_string)
        response.get_data()
        assert response.status_code == 200
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return sent


def test_q_of_a_trigram_or_more_reads_the_search_table_on_sqlite_only(app, api, map_id):
    bulk(api, map_id, *({"name": f'Spot "{n}"'} for n in range(3)))
    path = f"/maps/{map_id}/locations"
    for q, sort in (("pot", "createdAt"), ("SPOT \"1", "-name"), ('"2"', "updatedAt")):
        statements = sent_statements(app, api, path, {"q": q, "sort": sort})
        searching = [(sql, params) for sql, params in statements if "location_search" in sql]
        if backends.on_postgres():
            assert searching == []
            continue
        assert len(searching) == 1, q  # the keys of its few matches, counted in Python
        with app.app_context(), db.engine.connect() as connection:
            for sql, params in searching:
                explained = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params)
                plan = [row[3] for row in explained]
                assert any(step.startswith("SCAN location_search VIRTUAL TABLE") for step in plan), plan
                # The locations are read by the pks it finds, not by walking the map.
                assert "SEARCH locations USING INTEGER PRIMARY KEY (rowid=?)" in plan, plan
    short = sent_statements(app, api, path, {"q": "po"})
    assert not any("location_search" in sql for sql, _params in short)


def test_the_export_answers_q_without_the_search_table(app, api, map_id):
    bulk(api, map_id, {"name": "Spot one"}, {"name": "elsewhere"})
    path = f"/maps/{map_id}/locations.geojson"
    statements = sent_statements(app, api, path, {"q": "spot"})
    assert not any("location_search" in sql for sql, _params in statements)
    exported = api.get(path, query_string={"q": "spot"}).get_json()
    assert [feature["properties"]["name"] for feature in exported["features"]] == ["Spot one"]
