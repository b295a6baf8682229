"""Migrations: they build exactly the models' schema, on SQLite and PostgreSQL."""

from datetime import datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import downgrade, upgrade
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from mapapi import create_app
from mapapi.extensions import db
from mapapi.storage.search_indexes import PENDING_LIST_LIMIT, TRIGRAM_INDEXES, include_object
from mapapi.storage.upgrade import pending_migrations

from . import backends
from .factories import ApiClient, create_key
from .test_location_search import assert_search_table_in_step, differences, searched


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request, tmp_path):
    """The URL of an empty database of each kind (PostgreSQL skips when absent)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'migrated.sqlite3'}"
        return
    reason = backends.postgres_unavailable()
    if reason:
        pytest.skip(reason)
    url = backends.create_postgres_database()
    yield url
    backends.drop_postgres_database(url)


@pytest.fixture
def migration_app(empty_database):
    app = create_app({"SQLALCHEMY_DATABASE_URI": empty_database})
    yield app
    with app.app_context():
        db.engine.dispose()


def schema_differences(app) -> list:
    """What autogenerate would change to make the database match the models."""
    with app.app_context(), db.engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "include_object": include_object}
        )
        return compare_metadata(context, db.metadata)


def test_migrations_create_exactly_the_models_schema(migration_app):
    with migration_app.app_context():
        assert pending_migrations()
        upgrade()
        assert not pending_migrations()
        tables = set(inspect(db.engine).get_table_names())
    modelled = {name for name in tables if include_object(None, name, "table", True, None)}
    assert modelled == set(db.metadata.tables) | {"alembic_version"}
    assert schema_differences(migration_app) == []


def test_upgrade_keeps_existing_data_and_is_idempotent(migration_app):
    with migration_app.app_context():
        upgrade()
    runner = migration_app.test_cli_runner()
    created = runner.invoke(args=["accounts", "create", "kept@example.com"])
    assert created.exit_code == 0, created.output
    again = runner.invoke(args=["db", "upgrade"])
    assert again.exit_code == 0, again.output
    listed = runner.invoke(args=["accounts", "list"])
    assert "kept@example.com" in listed.stdout


def test_migrations_and_create_all_make_the_trigram_indexes_on_postgresql(migration_app):
    with migration_app.app_context():
        upgrade()
        on_postgresql = db.engine.dialect.name == "postgresql"
        if not on_postgresql:
            listed = "SELECT name FROM sqlite_master WHERE type = 'index'"
        else:
            listed = "SELECT indexname FROM pg_indexes WHERE tablename = 'locations'"
        with db.engine.connect() as connection:
            indexes = set(connection.execute(text(listed)).scalars())
    assert "ix_locations_map_id_lat_lng" in indexes
    assert (set(TRIGRAM_INDEXES) & indexes) == (set(TRIGRAM_INDEXES) if on_postgresql else set())


def trigram_index_definitions(app) -> dict:
    """Each trigram index's definition and storage options, as PostgreSQL keeps them."""
    listed = text(
        "SELECT c.relname, pg_get_indexdef(c.oid), c.reloptions FROM pg_class c"
        " WHERE c.relname = ANY(:names)"
    )
    with app.app_context(), db.engine.connect() as connection:
        rows = connection.execute(listed, {"names": list(TRIGRAM_INDEXES)}).all()
    return {name: (definition, options) for name, definition, options in rows}


def test_migrations_and_create_all_keep_the_trigram_indexes_pending_lists_short(migration_app):
    with migration_app.app_context():
        if db.engine.dialect.name != "postgresql":
            pytest.skip("SQLite has no trigram indexes")
        upgrade()
    migrated = trigram_index_definitions(migration_app)
    url = backends.create_postgres_database()
    try:
        created = create_app({"SQLALCHEMY_DATABASE_URI": url})
        with created.app_context():
            db.create_all()
        made = trigram_index_definitions(created)
        with created.app_context():
            db.engine.dispose()
    finally:
        backends.drop_postgres_database(url)
    assert set(migrated) == set(TRIGRAM_INDEXES)
    assert made == migrated
    for _definition, options in migrated.values():
        assert options == [f"gin_pending_list_limit={PENDING_LIST_LIMIT}"]


def search_schema(app) -> list[tuple]:
    """The search table, its FTS5 tables and its triggers as SQLite keeps
    them (type, name, table, SQL with its white space collapsed)."""
    listed = text(
        "SELECT type, name, tbl_name, sql FROM sqlite_master"
        " WHERE name LIKE 'location\\_search%' ESCAPE '\\' ORDER BY type, name"
    )
    with app.app_context(), db.engine.connect() as connection:
        rows = connection.execute(listed).all()
    return [(kind, name, table, " ".join((sql or "").split())) for kind, name, table, sql in rows]


def test_migrations_and_create_all_make_the_same_search_table_on_sqlite(migration_app, tmp_path):
    with migration_app.app_context():
        if db.engine.dialect.name != "sqlite":
            pytest.skip("PostgreSQL's trigram indexes have their own test")
        upgrade()
    created = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'created.sqlite3'}"})
    with created.app_context():
        db.create_all()
    migrated = search_schema(migration_app)
    assert {(kind, name) for kind, name, _table, _sql in migrated} >= {
        ("table", "location_search"),
        ("table", "location_search_content"),
        ("trigger", "location_search_insert"),
        ("trigger", "location_search_update"),
        ("trigger", "location_search_delete"),
    }
    assert search_schema(created) == migrated
    with created.app_context():
        db.engine.dispose()


def test_downgrade_drops_the_search_table_and_its_triggers(migration_app):
    with migration_app.app_context():
        upgrade()
        downgrade(revision=BEFORE_SEARCH_TABLE)
        if db.engine.dialect.name == "sqlite":
            assert search_schema(migration_app) == []
        with db.engine.begin() as connection:  # no trigger left that writes to it
            _insert_locations(connection, [("Café", "", "")])
        upgrade()
    assert_search_table_in_step(migration_app)


def test_upgrade_indexes_the_locations_already_there(migration_app):
    """A database of the revision before the search table, with locations:
    ``mapapi db upgrade`` fills the table, and ``q`` finds them."""
    with migration_app.app_context():
        upgrade(revision=BEFORE_SEARCH_TABLE)
        with db.engine.begin() as connection:
            _insert_locations(
                connection,
                [("İstanbul Kebap", "", "İSTİKLAL Cd."), ("Straße", "ΟΔΥΣΣΕΥΣ", ""),
                 ("Old Mill", "by the river", "1 River Road"), ("🍕 Party", "", "")],
            )  # fmt: skip
    upgraded = migration_app.test_cli_runner().invoke(args=["db", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    assert_search_table_in_step(migration_app)
    api = ApiClient(migration_app.test_client(), create_key(migration_app, "searcher@example.com"))
    map_id = _IDS["map"]
    assert searched(api, map_id, "river") == ["Old Mill"]
    assert searched(api, map_id, "İst") == ["İstanbul Kebap"]
    assert searched(api, map_id, "ευς") == ["Straße"]
    assert differences(api, map_id, ["🍕 p", "strasse", "straße", "ri", "1 r", "cd."]) == {}


BEFORE_SEARCH_TABLE = "5c3e9a1b7d20"


def _insert_locations(connection, rows) -> None:
    """An account (``searcher@example.com``), its map, and locations (name,
    description, address) written as the revision before the search table
    wrote them."""
    now = datetime(2026, 11, 21, 9, 30)
    connection.execute(
        text(
            "INSERT INTO accounts (id, email, plan, created_at)"
            " VALUES (:account, 'searcher@example.com', 'pro', :now)"
        ),
        {**_IDS, "now": now},
    )
    connection.execute(text(_BEFORE_EXTERNAL_ID[1]), {**_IDS, "now": now})  # the map
    connection.execute(
        text(
            "INSERT INTO locations (id, map_id, name, lat, lng, description, address, properties,"
            " name_folded, description_folded, address_folded, created_at, updated_at)"
            " VALUES (:id, :map, :name, 0, 0, :description, :address, '{}', :name_folded,"
            " :description_folded, :address_folded, :now, :now)"
        ),
        [
            {"id": f"{n:022d}", "map": _IDS["map"], "now": now, "name": name,
             "description": description, "address": address, "name_folded": name.lower(),
             "description_folded": description.lower(), "address_folded": address.lower()}
            for n, (name, description, address) in enumerate(rows)
        ],
    )  # fmt: skip


def test_upgrade_fills_the_lower_cased_copies_of_existing_locations(migration_app):
    """A database of the previous revision, with locations, upgraded in place."""
    with migration_app.app_context():
        upgrade(revision="1dda07e0f1ae")
        with db.engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO accounts (id, email, plan, created_at) "
                    "VALUES ('a', 'a@example.com', 'pro', '2026-01-01')"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO maps (id, account_id, title, slug, description, country, city,"
                    " public, allow_cloning, style, created_at, updated_at) VALUES ('m', 'a', 't',"
                    " 't', '', '', '', false, true, 'streets', '2026-01-01', '2026-01-01')"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO locations (id, map_id, name, lat, lng, description, address,"
                    " properties, created_at, updated_at) VALUES (:id, 'm', :name, 0, 0,"
                    " 'ÉTÉ', 'İ', '{}', '2026-01-01', '2026-01-01')"
                ),
                [{"id": f"l{n}", "name": f"Café {n} ΣΑΣ"} for n in range(1500)],
            )
        upgrade()
        with db.engine.connect() as connection:
            rows = connection.execute(
                text("SELECT name_folded, description_folded, address_folded FROM locations")
            ).all()
    assert len(rows) == 1500
    assert set(rows[0][1:]) == {"été", "İ".lower()}
    assert {row[0] for row in rows} == {f"Café {n} ΣΑΣ".lower() for n in range(1500)}


def test_external_id_upgrade_keeps_locations_and_their_memberships(migration_app):
    """A database of the revision before externalId existed: its locations,
    their tags and layers survive the upgrade, with a null externalId, and
    the new unique index holds."""
    with migration_app.app_context():
        upgrade(revision="1dda07e0f1ae")
        with db.engine.begin() as connection:
            for statement in _BEFORE_EXTERNAL_ID:
                connection.execute(text(statement), {**_IDS, "now": datetime(2026, 11, 21, 9, 30)})
        upgrade()
        assert not pending_migrations()
        with db.engine.connect() as connection:
            rows = connection.execute(text("SELECT id, external_id FROM locations ORDER BY pk")).all()
            tags = connection.execute(text("SELECT location_id, tag_id FROM location_tags")).all()
            layers = connection.execute(text("SELECT location_id, layer_id FROM location_layers")).all()
        assert [tuple(row) for row in rows] == [("l" * 22, None), ("m" * 22, None)]
        assert [tuple(row) for row in tags] == [("l" * 22, "t" * 22)]
        assert [tuple(row) for row in layers] == [("l" * 22, "y" * 22)]
        with db.engine.begin() as connection:
            connection.execute(text("UPDATE locations SET external_id = 'A1' WHERE id = :id"), {"id": "l" * 22})
        with pytest.raises(IntegrityError), db.engine.begin() as connection:
            connection.execute(
                text("UPDATE locations SET external_id = 'A1' WHERE id = :id"), {"id": "m" * 22}
            )
    assert schema_differences(migration_app) == []


_IDS = {name: char * 22 for name, char in (("account", "a"), ("map", "p"), ("tag", "t"),
                                            ("layer", "y"), ("first", "l"), ("second", "m"))}  # fmt: skip
_BEFORE_EXTERNAL_ID = [
    (
        "INSERT INTO accounts (id, email, plan, created_at)"
        " VALUES (:account, 'a@example.com', 'pro', :now)"
    ),
    (
        "INSERT INTO maps (id, account_id, title, slug, description, country, city, public,"
        " allow_cloning, style, created_at, updated_at)"
        " VALUES (:map, :account, 'T', 't', '', '', '', false, true, 'streets', :now, :now)"
    ),
    "INSERT INTO tags (id, map_id, name, created_at, updated_at) VALUES (:tag, :map, 't', :now, :now)",
    (
        "INSERT INTO layers (id, map_id, name, color, position, route_enabled,"
        " route_show_by_default, created_at, updated_at)"
        " VALUES (:layer, :map, 'L', '#3B82F6', 0, false, false, :now, :now)"
    ),
    (
        "INSERT INTO locations (id, map_id, name, lat, lng, description, address, properties,"
        " created_at, updated_at) VALUES (:first, :map, 'n', 1, 2, '', '', '{}', :now, :now),"
        " (:second, :map, 'n', 1, 2, '', '', '{}', :now, :now)"
    ),
    "INSERT INTO location_tags (location_id, tag_id, position) VALUES (:first, :tag, 0)",
    "INSERT INTO location_layers (location_id, layer_id) VALUES (:first, :layer)",
]


def test_upgrade_counts_the_cells_of_the_locations_already_there(migration_app):
    """The revision before location_cells, with locations: the upgrade
    counts them, and its triggers keep counting the next writes."""
    with migration_app.app_context():
        upgrade(revision="7d40a0a7c1e5")
        with db.engine.begin() as connection:
            _insert_locations(connection, [("One", "", ""), ("Two", "", "")])
        upgrade()
        with db.engine.begin() as connection:
            count = "SELECT count FROM location_cells WHERE level = 16"
            assert connection.execute(text(count)).scalars().all() == [2]
            connection.execute(text("DELETE FROM locations WHERE name = 'One'"))
            assert connection.execute(text(count)).scalars().all() == [1]
        downgrade(revision="7d40a0a7c1e5")
        assert "location_cells" not in inspect(db.engine).get_table_names()
        with db.engine.begin() as connection:  # no trigger left that writes to it
            connection.execute(text("DELETE FROM locations"))
