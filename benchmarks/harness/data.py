"""The seeded data: accounts, maps, locations, tags and layers, through the app's own tables."""

from __future__ import annotations

import contextlib
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from .settings import (
    ACCOUNTS,
    BIG_MAP_LOCATIONS,
    LOCATIONS_PER_MAP,
    MAPS_PER_ACCOUNT,
    RAISED_LIMIT,
    RARE_TAG_LOCATIONS,
    progress,
)


@dataclass
class SeededMap:
    id: str
    tag_ids: list[str]
    layer_ids: list[str]
    category_ids: list[str]
    location_ids: list[str] = field(default_factory=list)


@dataclass
class Seeded:
    """What the scenarios need to know about the seeded data."""

    secret: str
    rich: SeededMap  # read by GET /maps/:id and the page of 100
    writes: SeededMap  # POST single and bulk, PUT layers
    big: SeededMap  # the 100,000 locations
    layer_sets: list[list[str]]  # the membership sets PUT cycles through
    counts: dict[str, int]
    big_point: tuple[float, float]  # (lng, lat) of the big map's first location
    rare_tag: str  # a tag of the big map on RARE_TAG_LOCATIONS of its locations
    #: A map of the account that the main table leaves alone (the sync writes' own).
    spare: SeededMap | None = None


CITIES = [
    ("Paris", "France", 48.8566, 2.3522),
    ("Lisbon", "Portugal", 38.7223, -9.1393),
    ("Berlin", "Germany", 52.52, 13.405),
    ("Kyoto", "Japan", 35.0116, 135.7681),
    ("Montréal", "Canada", 45.5019, -73.5674),
    ("Buenos Aires", "Argentina", -34.6037, -58.3816),
]
THEMES = ["Coffee", "Bookshops", "Street food", "Parks", "Museums", "Night walks", "Bakeries"]
WORDS_A = [
    "Café",
    "Le Petit",
    "Casa",
    "Old",
    "Blue",
    "Golden",
    "Corner",
    "Little",
    "Green",
    "Royal",
]
WORDS_B = ["Lumière", "Atelier", "Harbour", "Garden", "Market", "Bridge", "Lantern", "Fox", "Mill"]
STREETS = ["Rue de Rivoli", "Main Street", "Avenida da Liberdade", "Kastanienallee", "Sanjo-dori"]
TAG_NAMES = [
    "wifi",
    "outdoor seating",
    "vegan",
    "quiet",
    "dog friendly",
    "late opening",
    "card only",
    "family",
    "rooftop",
    "historic",
    "live music",
    "local favourite",
]
CATEGORY_NAMES = ["Food", "Drinks", "Culture", "Shops", "Nature"]
LAYER_NAMES = ["Favourites", "To visit", "Visited", "Weekend", "With kids", "Rainy day"]
LAYER_COLORS = ["#3B82F6", "#EF4444", "#10B981", "#F59E0B", "#8B5CF6", "#EC4899"]


class Seeder:
    """Fills the app's tables with bulk Core INSERTs: seconds, not minutes.

    Rows are inserted in creation order (the integer ``pk`` orders lists),
    with timestamps that grow by a millisecond per row.
    """

    def __init__(self, connection, rng: random.Random):
        from mapapi.storage import models

        self.connection = connection
        self.rng = rng
        self.models = models
        self.clock = datetime(2026, 1, 5, 8, 0, 0)
        self.counts = {"maps": 0, "locations": 0, "location_tags": 0, "location_layers": 0}

    def tick(self) -> datetime:
        self.clock += timedelta(milliseconds=1)
        return self.clock

    def add_map(self, account_id: str, title: str, locations: int) -> SeededMap:
        """A map with its tags, layers and categories, then ``locations`` locations."""
        m = self.models
        place = self.rng.choice(CITIES)
        city, _, lat, lng = place
        map_id = m.new_id()
        self.insert(m.Map.__table__, [self.map_row(map_id, account_id, title, place)])
        tags = [{"name": name, "color": None} for name in TAG_NAMES]
        layers = [
            {
                "name": name,
                "color": color,
                "position": position,
                "route_enabled": position == 0,
                "route_show_by_default": False,
            }
            for position, (name, color) in enumerate(zip(LAYER_NAMES, LAYER_COLORS, strict=True))
        ]
        categories = [
            {"name": name, "color": "#111827", "icon": name.lower()} for name in CATEGORY_NAMES
        ]
        seeded = SeededMap(
            id=map_id,
            tag_ids=self.add_children(m.Tag.__table__, map_id, tags),
            layer_ids=self.add_children(m.Layer.__table__, map_id, layers),
            category_ids=self.add_children(m.Category.__table__, map_id, categories),
        )
        self.counts["maps"] += 1
        self.add_locations(seeded, (lat, lng, city), locations)
        return seeded

    def map_row(self, map_id: str, account_id: str, title: str, place: tuple) -> dict:
        from slugify import slugify

        city, country, lat, lng = place
        created = self.tick()
        return {
            "id": map_id,
            "account_id": account_id,
            "title": title,
            "slug": slugify(title) or "map",
            "description": f"{title}: our picks in {city}.",
            "country": country,
            "city": city,
            "public": self.rng.random() < 0.3,
            "allow_cloning": True,
            "style": self.rng.choice(["streets", "light", "outdoors"]),
            "center_lat": lat,
            "center_lng": lng,
            "zoom": 12.5,
            "created_at": created,
            "updated_at": created,
        }

    def add_children(self, table, map_id: str, rows: list[dict]) -> list[str]:
        for row in rows:
            created = self.tick()
            row.update(
                id=self.models.new_id(), map_id=map_id, created_at=created, updated_at=created
            )
        self.insert(table, rows)
        return [row["id"] for row in rows]

    def add_locations(self, seeded: SeededMap, where: tuple, count: int, chunk: int = 1_000):
        """``count`` locations, each with 1-4 tags and 1-3 layers, in chunks.

        Chunks of 1,000: on a loaded PostgreSQL, 10,000 rows sent at once
        (with the location cells' triggers) outlasted the connection's
        ``tcp_user_timeout`` (10 s) and the seeding failed."""
        m = self.models
        for start in range(0, count, chunk):
            locations, tag_links, layer_links = [], [], []
            for _ in range(min(chunk, count - start)):
                row = self.location_row(seeded, where)
                locations.append(row)
                tags = self.rng.sample(seeded.tag_ids, self.rng.randint(1, 4))
                tag_links += [
                    {"location_id": row["id"], "tag_id": tag, "position": position}
                    for position, tag in enumerate(tags)
                ]
                layers = self.rng.sample(seeded.layer_ids, self.rng.randint(1, 3))
                layer_links += [{"location_id": row["id"], "layer_id": layer} for layer in layers]
            self.insert(m.Location.__table__, locations)
            self.insert(m.LocationTag.__table__, tag_links)
            self.insert(m.location_layers, layer_links)
            seeded.location_ids += [row["id"] for row in locations]
            self.counts["locations"] += len(locations)
            self.counts["location_tags"] += len(tag_links)
            self.counts["location_layers"] += len(layer_links)

    def add_rare_tag(self, seeded: SeededMap) -> str:
        """One more tag, on a few of the map's locations: a filter that selects little."""
        (tag_id,) = self.add_children(
            self.models.Tag.__table__, seeded.id, [{"name": "Rare find", "color": None}]
        )
        links = [
            {"location_id": location_id, "tag_id": tag_id, "position": 9}
            for location_id in seeded.location_ids[:: len(seeded.location_ids) // RARE_TAG_LOCATIONS]
        ][:RARE_TAG_LOCATIONS]
        self.insert(self.models.LocationTag.__table__, links)
        return tag_id

    def location_row(self, seeded: SeededMap, where: tuple) -> dict:
        created = self.tick()
        return {
            "id": self.models.new_id(),
            "map_id": seeded.id,
            **location_fields(self.rng, where, seeded.category_ids),
            "created_at": created,
            "updated_at": created,
        }

    def insert(self, table, rows: list[dict]) -> None:
        """One multi-row ``INSERT``: the statement triggers (the location
        cells') run once for the rows, not once a row as an executemany makes
        them on PostgreSQL, where 110,000 locations then took over 15 minutes."""
        if rows:
            self.connection.execute(table.insert().values(rows))


def location_fields(rng: random.Random, where: tuple, category_ids: list[str]) -> dict:
    """A location's own fields, by column: a name, a spot near ``where`` (lat, lng, city),
    a description, an address, most often a category, and its properties."""
    lat, lng, city = where
    name = f"{rng.choice(WORDS_A)} {rng.choice(WORDS_B)}"
    return {
        "name": name,
        "lat": round(lat + rng.uniform(-0.05, 0.05), 6),
        "lng": round(lng + rng.uniform(-0.05, 0.05), 6),
        "description": f"{name}, a {rng.choice(TAG_NAMES)} spot worth the detour.",
        "address": f"{rng.randint(1, 200)} {rng.choice(STREETS)}, {city}",
        "category_id": rng.choice(category_ids + [None]),
        "properties": location_properties(rng, name),
    }


def location_properties(rng: random.Random, name: str) -> dict:
    """A realistic ``properties`` object: an external id and a few facts."""
    return {
        "externalId": f"osm:node/{rng.randint(10**8, 10**10)}",
        "rating": round(rng.uniform(2.5, 5.0), 1),
        "priceLevel": rng.randint(1, 4),
        "website": "https://example.com/" + name.lower().replace(" ", "-"),
        "openingHours": {"mon-fri": "08:00-19:00", "sat": "09:00-18:00", "sun": None},
        "wheelchair": rng.random() < 0.6,
    }


def make_app(database_url: str, **settings):
    """The app on ``database_url`` with the raised limits (in this process),
    and ``settings``."""
    from mapapi import create_app

    return create_app(
        {
            **settings,
            "SQLALCHEMY_DATABASE_URI": database_url,
            "BOOTSTRAP": "0",
            "RATELIMIT_STORAGE_URI": "memory://",
            "RATELIMIT_GENERAL": RAISED_LIMIT,
            "RATELIMIT_MAP_CREATE": RAISED_LIMIT,
            "RATELIMIT_BULK": RAISED_LIMIT,
            "RATELIMIT_SYNC": RAISED_LIMIT,
        }
    )


def create_schema(app) -> None:
    """``db.create_all()``, stamped as the newest migration so ``serve`` accepts it."""
    from flask_migrate import stamp

    from mapapi.extensions import db

    with app.app_context():
        db.create_all()
        stamp()
        db.engine.dispose()


def seed_database(database_url: str) -> Seeded:
    """Accounts and keys through the app's services, the rest in bulk."""
    from sqlalchemy import select

    from mapapi.extensions import db
    from mapapi.services import accounts
    from mapapi.services.keys import issue_key

    started = time.monotonic()
    app = make_app(database_url)
    create_schema(app)
    rng = random.Random(20261121)
    with app.app_context():
        account_ids, secrets = [], []
        for number in range(ACCOUNTS):
            account = accounts.create_account(f"user{number}@example.com", "pro")
            secrets.append(issue_key(account, "benchmark", "READ_WRITE").secret)
            account_ids.append(account.id)
        db.session.commit()
        with db.engine.begin() as connection:
            seeder = Seeder(connection, rng)
            maps = [
                seeder.add_map(account_id, f"{rng.choice(THEMES)} {number + 1}", LOCATIONS_PER_MAP)
                for account_id in account_ids
                for number in range(MAPS_PER_ACCOUNT)
            ]
            big = seeder.add_map(account_ids[0], "Every bench in the country", BIG_MAP_LOCATIONS)
            rare_tag = seeder.add_rare_tag(big)
            m = seeder.models
            big_point = connection.execute(
                select(m.Location.lng, m.Location.lat).where(m.Location.id == big.location_ids[0])
            ).one()
            writes = maps[1]
            layer_sets = membership_sets(writes.layer_ids)
            reset_pool_layers(connection, writes, layer_sets)
        if db.engine.dialect.name == "postgresql":
            analyze_postgres(db.engine)
        db.engine.dispose()
    progress(f"  seeded {seeder.counts} in {time.monotonic() - started:.1f} s")
    return Seeded(
        secrets[0], maps[0], writes, big, layer_sets, seeder.counts, tuple(big_point), rare_tag,
        spare=maps[2],
    )  # fmt: skip


def membership_sets(layer_ids: list[str]) -> list[list[str]]:
    """Layer sets that PUT cycles through; neighbours always differ."""
    a, b, c, d, e, f = layer_ids[:6]
    return [[a], [b, c], [a, d], [e], [c, f, b], [d, e]]


def reset_pool_layers(connection, writes: SeededMap, layer_sets: list[list[str]]) -> None:
    """Give the PUT pool known memberships, so the first PUT of each changes them.

    Location ``i`` starts on set ``i - 1``; PUT pass ``p`` sends set ``i + p``.
    """
    from mapapi.storage.models import location_layers

    pool = writes.location_ids[:LOCATIONS_PER_MAP]
    connection.execute(location_layers.delete().where(location_layers.c.location_id.in_(pool)))
    rows = [
        {"location_id": location_id, "layer_id": layer_id}
        for index, location_id in enumerate(pool)
        for layer_id in layer_sets[(index - 1) % len(layer_sets)]
    ]
    connection.execute(location_layers.insert(), rows)


def analyze_postgres(engine) -> None:
    """What autovacuum would soon do after a bulk load: fresh statistics and visibility."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM ANALYZE")


@contextlib.contextmanager
def database_for(backend: str, folder: Path):
    """A fresh, empty database: a SQLite file in ``folder``, or a scratch PostgreSQL one."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'bench.sqlite3'}"
    else:
        with scratch_postgres(os.environ["MAPAPI_DATABASE_URL"]) as url:
            yield url


@contextlib.contextmanager
def scratch_postgres(url: str):
    """A fresh database on the server ``url`` names, dropped afterwards.

    The benchmark never writes into an existing database: it creates
    ``mapapi_bench_<random>`` beside it (the URL's user needs CREATEDB).
    """
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    name = f"mapapi_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except Exception as error:
        admin.dispose()
        raise SystemExit(
            f"cannot create a scratch database on {make_url(url).render_as_string()}: {error}\n"
            "The benchmark needs a PostgreSQL user allowed to CREATE DATABASE."
        ) from None
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


