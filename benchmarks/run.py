#!/usr/bin/env python3
"""mapapi's benchmark: requests/s and latency of the hot paths over real HTTP.

One command, ``python benchmarks/run.py``, does everything (see README.md):

1. seeds a fresh database (SQLite in a temporary folder; PostgreSQL too when
   ``MAPAPI_DATABASE_URL`` points at one) through the app's own tables;
2. counts the SQL statements of one request per scenario in-process;
3. serves the app with ``mapapi serve --threads 8`` and a bare Flask JSON view
   with the same waitress settings, each in its own process;
4. drives each scenario with wrk from another process, several runs;
5. prints one table (medians over the runs) and the targets of issue 6.

Every process it starts is stopped on the way out, Ctrl-C and errors included.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
LUA_SCRIPT = HERE / "lua" / "scenario.lua"
API = "/api/v1"

#: High enough never to bind, on a one-second window: Flask-Limiter's
#: in-memory moving window keeps one entry per request still in the window,
#: so "N per hour" would make the limiter's list (and its cost) grow through
#: the whole benchmark; a second holds about as many entries as production's
#: "1000 per hour" does at most.
RAISED_LIMIT = "10000000 per second"

SERVER_THREADS = 8
BULK_SIZE = 100
PAGE_SIZE = 100
BIG_MAP_LOCATIONS = 100_000
#: 5 accounts x 4 maps x 500 locations = the 10,000 spread over maps.
ACCOUNTS = 5
MAPS_PER_ACCOUNT = 4
LOCATIONS_PER_MAP = 500
#: What tests/test_queries.py allows a fixed-size request (SMALL there).
SMALL_STATEMENT_COUNT = 12


def progress(message: str) -> None:
    """Progress goes to stderr so that stdout holds only the results."""
    print(message, file=sys.stderr, flush=True)


# --- scenarios ------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    body: str | None = None


@dataclass
class Scenario:
    """One row of the table: what wrk sends, to which server, and what must come back."""

    key: str
    label: str
    server: str  # "app" or "bare"
    requests: list[Request]
    headers: dict[str, str]
    expected_status: int = 200
    #: Locations each request creates (for the bulk-versus-single ratio).
    creates: int = 0


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


# --- seeding ----------------------------------------------------------------------

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

    def add_locations(self, seeded: SeededMap, where: tuple, count: int, chunk: int = 10_000):
        """``count`` locations, each with 1-4 tags and 1-3 layers, in chunks."""
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

    def location_row(self, seeded: SeededMap, where: tuple) -> dict:
        lat, lng, city = where
        rng = self.rng
        name = f"{rng.choice(WORDS_A)} {rng.choice(WORDS_B)}"
        created = self.tick()
        return {
            "id": self.models.new_id(),
            "map_id": seeded.id,
            "name": name,
            "lat": round(lat + rng.uniform(-0.05, 0.05), 6),
            "lng": round(lng + rng.uniform(-0.05, 0.05), 6),
            "description": f"{name}, a {rng.choice(TAG_NAMES)} spot worth the detour.",
            "address": f"{rng.randint(1, 200)} {rng.choice(STREETS)}, {city}",
            "category_id": rng.choice(seeded.category_ids + [None]),
            "properties": location_properties(rng, name),
            "created_at": created,
            "updated_at": created,
        }

    def insert(self, table, rows: list[dict]) -> None:
        if rows:
            self.connection.execute(table.insert(), rows)


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


def make_app(database_url: str):
    """The app on ``database_url`` with the raised limits (in this process)."""
    from mapapi import create_app

    return create_app(
        {
            "SQLALCHEMY_DATABASE_URI": database_url,
            "BOOTSTRAP": "0",
            "RATELIMIT_STORAGE_URI": "memory://",
            "RATELIMIT_GENERAL": RAISED_LIMIT,
            "RATELIMIT_MAP_CREATE": RAISED_LIMIT,
            "RATELIMIT_BULK": RAISED_LIMIT,
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
            writes = maps[1]
            layer_sets = membership_sets(writes.layer_ids)
            reset_pool_layers(connection, writes, layer_sets)
        if db.engine.dialect.name == "postgresql":
            analyze_postgres(db.engine)
        db.engine.dispose()
    progress(f"  seeded {seeder.counts} in {time.monotonic() - started:.1f} s")
    return Seeded(secrets[0], maps[0], writes, big, layer_sets, seeder.counts)


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


# --- scenarios from the seeded data ----------------------------------------------------


def build_scenarios(seeded: Seeded) -> list[Scenario]:
    rng = random.Random(7)
    auth = {"Authorization": f"Bearer {seeded.secret}"}
    json_auth = {**auth, "Content-Type": "application/json"}
    rich, writes, big = seeded.rich, seeded.writes, seeded.big

    def new_location(number: int) -> dict:
        name = f"Bench spot {number}"
        return {
            "name": name,
            "lat": round(rng.uniform(48.80, 48.90), 6),
            "lng": round(rng.uniform(2.25, 2.42), 6),
            "address": f"{number} Rue de Rivoli, Paris",
            "description": "Added by the benchmark.",
            "categoryId": rng.choice(writes.category_ids),
            "tagIds": rng.sample(writes.tag_ids, 2),
            "properties": location_properties(rng, name),
        }

    singles = [
        Request("POST", f"{API}/maps/{writes.id}/locations", json.dumps(new_location(n)))
        for n in range(50)
    ]
    bulks = [
        Request(
            "POST",
            f"{API}/maps/{writes.id}/locations/bulk",
            json.dumps(
                {"locations": [new_location(batch * BULK_SIZE + n) for n in range(BULK_SIZE)]}
            ),
        )
        for batch in range(4)
    ]
    pool = writes.location_ids[:LOCATIONS_PER_MAP]
    sets = seeded.layer_sets
    memberships = [
        Request(
            "PUT",
            f"{API}/maps/{writes.id}/locations/{location_id}/layers",
            json.dumps({"layerIds": sets[(index + visit) % len(sets)]}),
        )
        for visit in range(4)
        for index, location_id in enumerate(pool)
    ]
    page = f"{API}/maps/{big.id}/locations?pageSize={PAGE_SIZE}&page="
    return [
        Scenario("bare", "bare Flask view (limit)", "bare", [Request("GET", "/")], {}),
        Scenario(
            "get_map", "GET /maps/:id", "app", [Request("GET", f"{API}/maps/{rich.id}")], auth
        ),
        Scenario(
            "list_100",
            "GET locations pageSize=100",
            "app",
            [Request("GET", f"{API}/maps/{rich.id}/locations?pageSize={PAGE_SIZE}")],
            auth,
        ),
        Scenario("create", "POST location", "app", singles, json_auth, 201, creates=1),
        Scenario(
            "bulk", f"POST bulk of {BULK_SIZE}", "app", bulks, json_auth, 201, creates=BULK_SIZE
        ),
        Scenario("layers", "PUT location layers", "app", memberships, json_auth),
        Scenario("page_1", "big map page 1", "app", [Request("GET", page + "1")], auth),
        Scenario("page_1000", "big map page 1000", "app", [Request("GET", page + "1000")], auth),
        Scenario(
            "bad_key",
            "bad key (401)",
            "app",
            [Request("GET", f"{API}/maps/{rich.id}")],
            {"Authorization": "Bearer mk_live_" + "x" * 43},
            401,
        ),
        # Not a target: the floor of every API request, all of mapapi's
        # per-request work (hooks, rate limit, error body, headers, access log)
        # without the database.
        Scenario(
            "no_key",
            "no key (401, no SQL)",
            "app",
            [Request("GET", f"{API}/maps/{rich.id}")],
            {},
            401,
        ),
    ]


def statement_probes(seeded: Seeded, scenarios: list[Scenario]) -> list[Scenario]:
    """Extra requests whose counts show independence of page size and bulk size."""
    by_key = {scenario.key: scenario for scenario in scenarios}
    rich = seeded.rich
    one_item = json.loads(by_key["bulk"].requests[0].body)["locations"][:1]
    return [
        Scenario(
            "list_1",
            "GET locations pageSize=1",
            "app",
            [Request("GET", f"{API}/maps/{rich.id}/locations?pageSize=1")],
            by_key["list_100"].headers,
        ),
        Scenario(
            "bulk_1",
            "POST bulk of 1",
            "app",
            [
                Request(
                    "POST",
                    f"{API}/maps/{seeded.writes.id}/locations/bulk",
                    json.dumps({"locations": one_item}),
                )
            ],
            by_key["bulk"].headers,
            201,
            creates=1,
        ),
    ]


# --- SQL statements per request (in-process) ----------------------------------------------


def count_statements(database_url: str, scenarios: list[Scenario]) -> dict[str, dict]:
    """Statements one request of each scenario sends, after a warm-up request.

    Counted as tests/conftest.py's ``statements`` fixture counts them: every
    ``before_cursor_execute`` of the app's engine. The warm-up absorbs the
    key's ``lastUsedAt`` write (at most once a minute) and first-use costs.
    """
    from sqlalchemy import event

    from mapapi.extensions import db

    app = make_app(database_url)
    client = app.test_client()
    seen: list[str] = []

    def record(_conn, _cursor, statement, *_args):
        seen.append(" ".join(statement.split()))

    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", record)
    results = {}
    try:
        for scenario in scenarios:
            if scenario.server != "app":
                continue
            warm_up, counted = scenario.requests[0], scenario.requests[1 % len(scenario.requests)]
            send_in_process(client, scenario, warm_up)
            seen.clear()
            send_in_process(client, scenario, counted)
            results[scenario.key] = {"count": len(seen), "statements": list(seen)}
    finally:
        event.remove(engine, "before_cursor_execute", record)
        with app.app_context():
            db.engine.dispose()
    return results


def send_in_process(client, scenario: Scenario, request: Request):
    response = client.open(
        request.path, method=request.method, headers=scenario.headers, data=request.body
    )
    if response.status_code != scenario.expected_status:
        body = response.get_data(as_text=True)[:500]
        raise SystemExit(
            f"{scenario.label}: {request.method} {request.path} answered "
            f"{response.status_code}, not {scenario.expected_status}: {body}"
        )
    return response


# --- processes --------------------------------------------------------------------------


class Processes:
    """Every process the benchmark starts, stopped together on the way out."""

    def __init__(self):
        self.running: list[subprocess.Popen] = []

    def start(self, command: list[str], env: dict, log_path: Path) -> subprocess.Popen:
        log_file = open(log_path, "wb")
        # A session of its own: Ctrl-C reaches only us, and we stop it in order.
        process = subprocess.Popen(
            command,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log_file.close()
        self.running.append(process)
        return process

    def stop_all(self) -> None:
        for process in reversed(self.running):
            stop_process(process)
        self.running.clear()


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


#: Straight to 127.0.0.1, whatever http_proxy says.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def wait_until_serving(process: subprocess.Popen, url: str, log_path: Path, timeout=60.0):
    """Poll ``url`` until it answers 200; fail with the server's log if it died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited ({process.returncode}):\n{tail(log_path)}")
        try:
            with DIRECT.open(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise SystemExit(f"the server did not answer {url} within {timeout:.0f} s:\n{tail(log_path)}")


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def mapapi_command() -> list[str]:
    """``mapapi`` from this interpreter's environment (the console script, if installed)."""
    script = Path(sys.executable).with_name("mapapi")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from mapapi.cli import main; main()"]


def server_environment(database_url: str, instance_path: Path) -> dict:
    return {
        **os.environ,
        "MAPAPI_DATABASE_URL": database_url,
        "MAPAPI_BOOTSTRAP": "0",
        "MAPAPI_RATELIMIT_GENERAL": RAISED_LIMIT,
        "MAPAPI_RATELIMIT_MAP_CREATE": RAISED_LIMIT,
        "MAPAPI_RATELIMIT_BULK": RAISED_LIMIT,
        "MAPAPI_INSTANCE_PATH": str(instance_path),
    }


def start_app_server(processes: Processes, database_url: str, workdir: Path, name: str):
    port = free_port()
    log_path = workdir / f"server-{name}.log"
    command = mapapi_command() + [
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--threads",
        str(SERVER_THREADS),
    ]
    process = processes.start(command, server_environment(database_url, workdir), log_path)
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(process, base + "/healthz", log_path)
    return Server(name, base, process, log_path)


def start_bare_server(processes: Processes, workdir: Path):
    port = free_port()
    log_path = workdir / "server-bare.log"
    command = [sys.executable, str(Path(__file__).resolve()), "--serve-bare", str(port)]
    process = processes.start(command, {**os.environ}, log_path)
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(process, base + "/", log_path)
    return Server("bare", base, process, log_path)


def serve_bare(port: int) -> None:
    """The limit: a bare Flask JSON view under waitress, set up as ``mapapi serve`` is."""
    import waitress
    from flask import Flask, jsonify

    app = Flask("bare")

    @app.get("/")
    def bare():
        return jsonify(data={"ok": True})

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    waitress.serve(app, host="127.0.0.1", port=port, threads=SERVER_THREADS)


@dataclass
class Server:
    name: str
    base_url: str
    process: subprocess.Popen
    log_path: Path


# --- load --------------------------------------------------------------------------------


@dataclass
class Measurement:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    #: Responses without the expected status, by class, and socket errors.
    unexpected: dict[str, int]
    server_cpu: float  # % of one core, over the measured interval
    wrk_cpu: float
    #: The bare view's requests/s around this measurement (the ratio's denominator).
    reference_rps: float = 0.0
    #: For the bare view of a run: (max - min) / mean of its measurements.
    spread: float = 0.0

    @property
    def ratio(self) -> float:
        return self.rps / self.reference_rps

    @property
    def cpu_ms_per_request(self) -> float:
        """Server CPU per request: steadier than requests/s when others share the machine."""
        return 10 * self.server_cpu / self.rps


def ensure_wrk() -> str:
    """wrk's path; installs Debian's package when missing and we are root."""
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        progress("wrk is missing: installing Debian's package (apt-get install wrk)")
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "wrk"],
            check=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        found = shutil.which("wrk")
    if not found:
        raise SystemExit("wrk is not installed: apt-get install wrk (Debian/Ubuntu)")
    return found


def write_request_file(scenario: Scenario, directory: Path) -> Path:
    """The file scenario.lua reads: headers, then one request per line."""
    path = directory / f"requests-{scenario.key}.txt"
    lines = [f"H {name}: {value}" for name, value in scenario.headers.items()]
    for request in scenario.requests:
        if request.body is not None and "\n" in request.body:
            raise ValueError("request bodies must be one line of JSON")
        lines.append(f"R {request.method} {request.path} {request.body or ''}".rstrip())
    path.write_text("\n".join(lines) + "\n")
    return path


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: scenario.lua's counters, and how the table names them.
STATUS_CLASSES = {
    "s2xx": "2xx",
    "s401": "401",
    "s429": "429",
    "s4xx": "other 4xx",
    "s5xx": "5xx",
    "sother": "other status",
    "socket_errors": "socket errors",
    "timeouts": "timeouts",
}


def run_wrk(
    wrk: str,
    options,
    scenario: Scenario,
    server: Server,
    request_file: Path,
    duration: float,
    processes: Processes,
) -> Measurement:
    """One wrk run; wrk's own CPU time is the rusage of the child that just ended."""
    command = [
        wrk,
        f"-t{options.wrk_threads}",
        f"-c{options.connections}",
        f"-d{duration}s",
        "--timeout",
        "10s",
        "-s",
        str(LUA_SCRIPT),
        server.base_url,
        "--",
        str(request_file),
    ]
    server_before, wrk_before = process_cpu_seconds(server.process.pid), children_cpu_seconds()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    processes.running.append(process)
    try:
        stdout, stderr = process.communicate(timeout=duration + 60)
    finally:
        stop_process(process)
        processes.running.remove(process)
    wrk_cpu = children_cpu_seconds() - wrk_before
    server_cpu = process_cpu_seconds(server.process.pid) - server_before
    result = next(
        (
            json.loads(line.split(" ", 1)[1])
            for line in stdout.splitlines()
            if line.startswith("WRK_RESULT ")
        ),
        None,
    )
    if process.returncode != 0 or result is None:
        raise SystemExit(
            f"wrk failed on {scenario.label} ({process.returncode}):\n{stdout}\n{stderr}"
        )
    seconds = result["duration_us"] / 1e6
    expected = {200: "s2xx", 201: "s2xx", 401: "s401"}[scenario.expected_status]
    unexpected = {
        label: result[name]
        for name, label in STATUS_CLASSES.items()
        if name != expected and result[name]
    }
    return Measurement(
        rps=result["requests"] / seconds,
        p50_ms=result["p50_us"] / 1000,
        p99_ms=result["p99_us"] / 1000,
        requests=result["requests"],
        unexpected=unexpected,
        server_cpu=100 * server_cpu / seconds,
        wrk_cpu=100 * wrk_cpu / seconds,
    )


def load_phase(
    wrk: str,
    options,
    scenarios: list[Scenario],
    servers: dict,
    workdir: Path,
    processes: Processes,
    backend: str,
) -> list[dict[str, Measurement]]:
    """All runs; in each, the bare view is measured before, between and after the scenarios.

    A scenario's ratio divides by the mean of the two bare-view measurements
    on either side of it, seconds apart, so that the ratio stays honest when
    the speed of a shared machine drifts during a run.
    """
    files = {s.key: write_request_file(s, workdir) for s in scenarios}
    bare = next(s for s in scenarios if s.server == "bare")
    app_scenarios = [s for s in scenarios if s.server == "app"]

    def measure(scenario, run, warmup, duration):
        server, requests = servers[scenario.server], files[scenario.key]
        if warmup > 0:
            run_wrk(wrk, options, scenario, server, requests, warmup, processes)
        result = run_wrk(wrk, options, scenario, server, requests, duration, processes)
        progress(
            f"  [{backend} run {run}/{options.runs}] {scenario.label:<28} "
            f"{result.rps:8.1f} req/s  p50 {result.p50_ms:6.1f} ms  "
            f"p99 {result.p99_ms:6.1f} ms  (server {result.server_cpu:.0f}% "
            f"wrk {result.wrk_cpu:.0f}% CPU)"
        )
        return result

    runs = []
    for run in range(1, options.runs + 1):
        bares = [measure(bare, run, options.warmup, options.bare_duration)]
        measured = {}
        for scenario in app_scenarios:
            result = measure(scenario, run, options.warmup, options.duration)
            bares.append(measure(bare, run, 0, options.bare_duration))
            result.reference_rps = (bares[-2].rps + bares[-1].rps) / 2
            measured[scenario.key] = result
        measured["bare"] = combine_bare(bares)
        runs.append(measured)
    return runs


def merge_counts(counts) -> dict[str, int]:
    merged: dict[str, int] = {}
    for one in counts:
        for label, count in one.items():
            merged[label] = merged.get(label, 0) + count
    return merged


def combine_bare(bares: list[Measurement]) -> Measurement:
    """One run's bare-view figure: the mean of its measurements, and their spread."""
    rps = statistics.mean(m.rps for m in bares)
    return Measurement(
        rps=rps,
        p50_ms=statistics.mean(m.p50_ms for m in bares),
        p99_ms=statistics.mean(m.p99_ms for m in bares),
        requests=sum(m.requests for m in bares),
        unexpected=merge_counts(m.unexpected for m in bares),
        server_cpu=statistics.mean(m.server_cpu for m in bares),
        wrk_cpu=statistics.mean(m.wrk_cpu for m in bares),
        reference_rps=rps,
        spread=(max(m.rps for m in bares) - min(m.rps for m in bares)) / rps,
    )


# --- results -----------------------------------------------------------------------------


@dataclass
class Row:
    scenario: Scenario
    rps: float
    p50_ms: float
    p99_ms: float
    ratio: float
    statements: int | None
    server_cpu: float
    cpu_ms: float
    wrk_cpu: float
    unexpected: dict[str, int]


@dataclass
class Target:
    name: str
    value: str
    goal: str
    met: bool


def median_rows(scenarios, runs, statements) -> list[Row]:
    """Per scenario, the median over runs of each figure (ratios taken within a run)."""
    rows = []
    for scenario in scenarios:
        series = [run[scenario.key] for run in runs]
        ratios = [run[scenario.key].ratio for run in runs]
        rows.append(
            Row(
                scenario=scenario,
                rps=statistics.median(m.rps for m in series),
                p50_ms=statistics.median(m.p50_ms for m in series),
                p99_ms=statistics.median(m.p99_ms for m in series),
                ratio=statistics.median(ratios),
                statements=statements.get(scenario.key, {}).get("count"),
                server_cpu=statistics.median(m.server_cpu for m in series),
                cpu_ms=statistics.median(m.cpu_ms_per_request for m in series),
                wrk_cpu=statistics.median(m.wrk_cpu for m in series),
                unexpected=merge_counts(m.unexpected for m in series),
            )
        )
    return rows


def evaluate_targets(runs, statements) -> tuple[list[Target], dict]:
    """Issue 6, point 3: each ratio is taken within a run, then the median of the runs."""
    get_map = statistics.median(r["get_map"].ratio for r in runs)
    page = statistics.median(r["list_100"].ratio for r in runs)
    bulk = statistics.median(r["bulk"].rps * BULK_SIZE / r["create"].rps for r in runs)
    deep = statistics.median(r["page_1000"].p50_ms / r["page_1"].p50_ms for r in runs)
    deep_p99 = statistics.median(r["page_1000"].p99_ms / r["page_1"].p99_ms for r in runs)
    counts = {key: value["count"] for key, value in statements.items()}
    lists = [counts[k] for k in ("list_1", "list_100", "page_1", "page_1000")]
    sql_ok = (
        all(count <= SMALL_STATEMENT_COUNT for count in counts.values())
        and len(set(lists)) == 1
        and counts["bulk"] - counts["bulk_1"] <= 2
    )
    sql_value = (
        f"max {max(counts.values())}; lists {'/'.join(map(str, lists))} "
        f"(pageSize 1/100, p1/p1000); bulk 1/100: {counts['bulk_1']}/{counts['bulk']}"
    )
    targets = [
        Target("GET /maps/:id vs bare view", percent(get_map), ">= 50%", get_map >= 0.50),
        Target("page of 100 (layers, tags) vs bare view", percent(page), ">= 20%", page >= 0.20),
        Target("bulk of 100 vs single creates, locations/s", f"{bulk:.1f}x", ">= 25x", bulk >= 25),
        Target("page 1000 vs page 1, p50 latency", f"{deep:.2f}x", "<= 2x", deep <= 2.0),
        Target(
            "SQL statements per request",
            sql_value,
            f"<= {SMALL_STATEMENT_COUNT}, same for any page/bulk size",
            sql_ok,
        ),
    ]
    return targets, {"bulk_ratio": bulk, "deep_page_p50": deep, "deep_page_p99": deep_p99}


TABLE_HEADER = [
    "| db | scenario | req/s | p50 ms | p99 ms | vs bare | SQL/req "
    "| server CPU | CPU ms/req | wrk CPU |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
]


def table_rows(backend: str, rows: list[Row]) -> list[str]:
    """Rows of a Markdown table, so that it can be pasted into RESULTS.md as printed."""
    lines = []
    for row in rows:
        flag = ""
        if row.unexpected:
            counts = ", ".join(f"{count} {label}" for label, count in row.unexpected.items())
            flag = f" (unexpected: {counts})"
        lines.append(
            f"| {backend} | {row.scenario.label}{flag} | {row.rps:,.0f} | {row.p50_ms:.1f} | "
            f"{row.p99_ms:.1f} | {percent(row.ratio)} | "
            f"{'-' if row.statements is None else row.statements} | "
            f"{row.server_cpu:.0f}% | {row.cpu_ms:.2f} | {row.wrk_cpu:.0f}% |"
        )
    return lines


def percent(ratio: float) -> str:
    """A ratio as a percentage, with a decimal where it is small enough to need one."""
    return f"{ratio:.1%}" if ratio < 0.1 else f"{ratio:.0%}"


def machine_description() -> str:
    """Cores, CPU model, memory, Python: what RESULTS.md must say about the machine."""
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kilobytes = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kilobytes / 2**20:.0f} GiB RAM"
    return (
        f"{os.cpu_count()} cores ({model}){memory}, Python {sys.version.split()[0]}, "
        f"{Path(shutil.which('wrk') or 'wrk').name} {wrk_version()}"
    )


def code_description() -> str:
    """Which mapapi was measured: where it is imported from, and its commit."""
    import mapapi

    root = Path(mapapi.__file__).resolve().parent.parent
    git = ["git", "-C", str(root)]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            [*git, "status", "--porcelain", "--", "mapapi"], capture_output=True, text=True
        ).stdout.strip()
        return f"mapapi at {root}, commit {commit}{' with uncommitted changes' if changed else ''}"
    return f"mapapi at {root}"


def wrk_version() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        output = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout
        return output.split()[1] if output.split() else ""
    return ""


def load_average() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def print_report(results: list[dict], options, load_before: str, code: str) -> bool:
    """The one table (every backend), then derived ratios and the targets."""
    print()
    print(
        f"mapapi benchmark: median of {options.runs} run(s), {options.duration:g} s per "
        f"scenario, wrk -t{options.wrk_threads} -c{options.connections}, waitress "
        f"{SERVER_THREADS} threads; CPU in % of one core"
    )
    print(
        f"machine: {machine_description()}; load average (1/5/15 min) before "
        f"{load_before}, after {load_average()}"
    )
    print(f"code: {code} (at the start of the run)")
    print()
    table = list(TABLE_HEADER)
    for result in results:
        table += table_rows(result["backend"], result["rows"])
    print("\n".join(table))
    all_met = True
    for result in results:
        extra, targets, runs = result["extra"], result["targets"], result["runs"]
        spreads = ", ".join(f"{run['bare'].spread:.0%}" for run in runs)
        print()
        print(
            f"{result['backend']}: bulk vs single creates: {extra['bulk_ratio']:.1f}x the "
            f"locations per second; page 1000 vs page 1: {extra['deep_page_p50']:.2f}x the p50 "
            f"latency ({extra['deep_page_p99']:.2f}x p99); spread of the bare view within each "
            f"run: {spreads}"
        )
        print(f"{result['backend']}: targets (issue 6, point 3):")
        for target in targets:
            all_met &= target.met
            print(
                f"  {'PASS' if target.met else 'FAIL'}  {target.name}: {target.value} "
                f"(target {target.goal})"
            )
        bare = next(row for row in result["rows"] if row.scenario.key == "bare")
        print(
            f"{result['backend']}: load generator check: on the bare view wrk used "
            f"{bare.wrk_cpu:.0f}% of a core while the server used {bare.server_cpu:.0f}% "
            f"({os.cpu_count()} cores)."
        )
    if options.show_sql:
        for result in results:
            print(f"\nSQL statements per scenario ({result['backend']}):")
            for key, counted in result["statements"].items():
                print(f"  {key}: {counted['count']}")
                for statement in counted["statements"]:
                    print(f"      {statement[:160]}")
    return all_met


# --- profile ------------------------------------------------------------------------------


#: The hot paths --profile runs, reads then writes; a bulk counts as one request.
PROFILED = ("get_map", "list_100", "create", "bulk")


def profile_endpoints(database_url: str, scenarios: list[Scenario], requests: int, workdir: Path):
    """pyinstrument over ``requests`` in-process requests of each hot path.

    The WSGI app is called directly with prebuilt environs, so the profile
    holds the app's own work (hooks, views, SQL, JSON), not a test client's.
    The access log is switched on, writing to a file, as ``mapapi serve``
    means it to be. Before profiling, the same requests are timed without
    the profiler: thread CPU time is the cost that other processes on a
    shared machine cannot inflate.
    """
    try:
        from pyinstrument import Profiler
    except ImportError:
        raise SystemExit("--profile needs pyinstrument: pip install pyinstrument") from None

    access = logging.getLogger("mapapi.access")
    access.setLevel(logging.INFO)
    access.addHandler(logging.FileHandler(workdir / "profile-access.log"))
    access.propagate = False
    app = make_app(database_url)
    by_key = {s.key: s for s in scenarios}
    for key in PROFILED:
        scenario = by_key[key]
        for prepared in wsgi_environs(scenario, 50):
            call_wsgi(app, prepared, scenario.expected_status)
        batch = wsgi_environs(scenario, requests)
        wall, cpu = time.perf_counter(), time.thread_time()
        for prepared in batch:
            call_wsgi(app, prepared, scenario.expected_status)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        batch = wsgi_environs(scenario, requests)
        profiler = Profiler(interval=0.0002)
        profiler.start()
        for prepared in batch:
            call_wsgi(app, prepared, scenario.expected_status)
        profiler.stop()
        print(
            f"\n=== profile: {scenario.label}: {requests} requests in-process; without the "
            f"profiler {cpu / requests * 1e6:.0f} µs CPU ({wall / requests * 1e6:.0f} µs wall) "
            "per request ==="
        )
        print_profile_summary(profiler.last_session.root_frame())
        # mapapi's frames stay visible even where it is installed in site-packages.
        print(
            profiler.output_text(
                unicode=True,
                color=False,
                time="percent_of_total",
                processor_options={"show_regex": r".*/mapapi/.*"},
            )
        )


def wsgi_environs(scenario: Scenario, count: int) -> list[dict]:
    """Fresh WSGI environs of the scenario's first request, built before timing starts."""
    from werkzeug.test import EnvironBuilder

    request = scenario.requests[0]
    return [
        EnvironBuilder(
            path=request.path, method=request.method, headers=scenario.headers, data=request.body
        ).get_environ()
        for _ in range(count)
    ]


def call_wsgi(app, environ, expected_status: int) -> None:
    statuses = []
    body = app(environ, lambda status, headers, exc_info=None: statuses.append(status))
    try:
        b"".join(body)
    finally:
        if hasattr(body, "close"):
            body.close()
    if not statuses or not statuses[0].startswith(f"{expected_status} "):
        raise SystemExit(f"profiled request answered {statuses}")


def frame_place(frame) -> tuple[str, str]:
    """(owner, file) of a frame: a library and its subpackage, or a mapapi module."""
    path = (frame.file_path or "").replace("\\", "/")
    # Libraries first: a venv may itself live in a folder named mapapi.
    if "site-packages/" in path and "site-packages/mapapi/" not in path:
        inside = path.split("site-packages/", 1)[1]
        parts = inside.split("/")
        owner = ".".join(parts[:2]) if len(parts) > 2 else parts[0]
        return owner.removesuffix(".py"), inside
    if "/mapapi/" in path:
        inside = "mapapi/" + path.rsplit("/mapapi/", 1)[1]
        return inside.removesuffix(".py").replace("/", "."), inside
    if not path or path.startswith("<"):
        return "built-in (C)", path or "<built-in>"
    return "stdlib " + Path(path).stem, Path(path).name


#: Library functions whose inclusive time says where a request's time goes.
LANDMARKS = {
    "sqlalchemy/engine/base.py:_execute_context": "SQLAlchemy: execute (driver included)",
    "<built-in>:Cursor.execute": "sqlite3 driver: execute",
    "<built-in>:Cursor.fetchall": "sqlite3 driver: fetch rows",
    "sqlalchemy/orm/loading.py:instances": "SQLAlchemy ORM: rows into objects (selectin included)",
    "sqlalchemy/orm/strategies.py:_load_for_path": "SQLAlchemy ORM: selectinload of a relation",
    "marshmallow/schema.py:dump": "marshmallow: dump the output schema",
    "mapapi/contract/jsonprovider.py:response": "JSON encoding of the response (jsonify, orjson)",
    "threading.py:start": "starting threads (limits' MemoryStorage expiry timer)",
}


def print_profile_summary(root) -> None:
    """Self time by library, the costliest functions, and mapapi's functions inclusive."""
    total = root.time
    by_owner: dict[str, float] = {}
    by_function: dict[str, float] = {}
    inclusive: dict[str, float] = {}
    landmarks: dict[str, float] = {}

    def walk(frame, open_functions: frozenset):
        if frame.is_synthetic:  # "[self]" frames: already in their parent's self time
            return
        owner, inside = frame_place(frame)
        name = f"{inside}:{frame.function}"
        by_owner[owner] = by_owner.get(owner, 0) + frame.total_self_time
        by_function[name] = by_function.get(name, 0) + frame.total_self_time
        if name not in open_functions:
            if inside.startswith("mapapi/"):
                inclusive[name] = inclusive.get(name, 0) + frame.time
            if name in LANDMARKS:
                landmarks[LANDMARKS[name]] = landmarks.get(LANDMARKS[name], 0) + frame.time
            open_functions = open_functions | {name}
        for child in frame.children:
            walk(child, open_functions)

    walk(root, frozenset())

    def show(title, table, count):
        print(title)
        for name, seconds in sorted(table.items(), key=lambda item: -item[1])[:count]:
            print(f"  {100 * seconds / total:5.1f}%  {name}")

    show("self time by library (subpackage) or mapapi module:", by_owner, 18)
    show("self time by function, top 20:", by_function, 20)
    show("inclusive time of mapapi's functions, top 20:", inclusive, 20)
    show("inclusive time of library landmarks:", landmarks, len(LANDMARKS))


# --- main ---------------------------------------------------------------------------------


def parse_options(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="load runs; the table shows medians (3)"
    )
    parser.add_argument("--duration", type=int, default=6, help="seconds per scenario (6)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up seconds before each (1)")
    parser.add_argument(
        "--bare-duration", type=int, default=3, help="seconds of each bare-view measurement (3)"
    )
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (16)")
    parser.add_argument("--wrk-threads", type=int, default=2, help="wrk threads (2)")
    parser.add_argument(
        "--sqlite-only",
        action="store_true",
        help="skip PostgreSQL even when MAPAPI_DATABASE_URL names one",
    )
    parser.add_argument("--show-sql", action="store_true", help="list each scenario's statements")
    parser.add_argument("--json", type=Path, help="also write the raw figures to this file")
    parser.add_argument(
        "--profile",
        type=int,
        metavar="N",
        nargs="?",
        const=500,
        help="instead of the load phase, profile N in-process requests of "
        "GET /maps/:id, the page of 100, a single create and a bulk (needs pyinstrument)",
    )
    parser.add_argument("--serve-bare", type=int, metavar="PORT", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def backends(options) -> list[str]:
    names = ["sqlite"]
    url = os.environ.get("MAPAPI_DATABASE_URL", "")
    if url.startswith("postgresql") and not options.sqlite_only and options.profile is None:
        names.append("postgresql")
    return names


@contextlib.contextmanager
def database_for(backend: str, workdir: Path):
    if backend == "sqlite":
        yield f"sqlite:///{workdir / 'bench.sqlite3'}"
    else:
        with scratch_postgres(os.environ["MAPAPI_DATABASE_URL"]) as url:
            yield url


def benchmark_backend(backend, options, wrk, workdir, processes, servers) -> dict:
    """Seed, count statements, serve, load: the figures of one database."""
    with database_for(backend, workdir) as url:
        progress(f"{backend}: seeding")
        seeded = seed_database(url)
        scenarios = build_scenarios(seeded)
        if options.profile is not None:
            profile_endpoints(url, scenarios, options.profile, workdir)
            return {}
        progress(f"{backend}: counting SQL statements in-process")
        statements = count_statements(url, scenarios + statement_probes(seeded, scenarios))
        progress(f"{backend}: starting mapapi serve")
        app_server = start_app_server(processes, url, workdir, backend)
        try:
            runs = load_phase(
                wrk, options, scenarios, {**servers, "app": app_server}, workdir, processes, backend
            )
        finally:
            stop_process(app_server.process)
            processes.running.remove(app_server.process)
        rows = median_rows(scenarios, runs, statements)
        targets, extra = evaluate_targets(runs, statements)
        return {
            "backend": backend,
            "rows": rows,
            "targets": targets,
            "extra": extra,
            "runs": runs,
            "statements": statements,
            "seeded": seeded.counts,
            "access_log_lines": count_access_lines(app_server.log_path),
        }


def count_access_lines(log_path: Path) -> int:
    """How many access-log lines the server wrote (0 means its access log was off)."""
    try:
        return sum('"method"' in line for line in log_path.read_text(errors="replace").splitlines())
    except OSError:
        return 0


def write_json(path: Path, results: list[dict], options) -> None:
    def plain(result):
        return {
            "backend": result["backend"],
            "rows": [
                {"scenario": r.scenario.key, "label": r.scenario.label}
                | {name: value for name, value in vars(r).items() if name != "scenario"}
                for r in result["rows"]
            ],
            "targets": [vars(t) for t in result["targets"]],
            "extra": result["extra"],
            "runs": [{k: vars(m) for k, m in run.items()} for run in result["runs"]],
            "statements": result["statements"],
            "seeded": result["seeded"],
            "access_log_lines": result["access_log_lines"],
        }

    path.write_text(
        json.dumps(
            {
                "options": {k: str(v) for k, v in vars(options).items()},
                "results": [plain(r) for r in results],
            },
            indent=1,
        )
    )


def main(argv=None) -> int:
    options = parse_options(argv)
    if options.serve_bare is not None:
        serve_bare(options.serve_bare)
        return 0
    started, load_before, code = time.monotonic(), load_average(), code_description()
    # SIGTERM unwinds like Ctrl-C does, through every finally that stops a process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    names = backends(options)
    wrk = ensure_wrk() if options.profile is None else None
    scenarios = 8  # app scenarios; the bare view is measured before and after each
    per_run = scenarios * (options.duration + options.warmup + options.bare_duration)
    slots = len(names) * options.runs * (per_run + options.bare_duration + options.warmup)
    if options.profile is None:
        progress(f"backends: {', '.join(names)}; the load phase takes about {slots / 60:.1f} min")
    processes = Processes()
    results = []
    with tempfile.TemporaryDirectory(prefix="mapapi-bench-") as directory:
        workdir = Path(directory)
        # The app reads instance/config.py from its instance folder: keep the
        # benchmark independent of whatever the checkout's instance/ holds.
        os.environ["MAPAPI_INSTANCE_PATH"] = str(workdir)
        try:
            servers = {}
            if options.profile is None:
                servers["bare"] = start_bare_server(processes, workdir)
            for backend in names:
                result = benchmark_backend(backend, options, wrk, workdir, processes, servers)
                if result:
                    results.append(result)
        except KeyboardInterrupt:
            progress("interrupted: stopping the servers")
            return 130
        finally:
            processes.stop_all()
    if options.profile is not None:
        return 0
    all_met = print_report(results, options, load_before, code)
    for result in results:
        if result["access_log_lines"] == 0:
            print(
                f"note ({result['backend']}): the server wrote no access-log lines during the "
                "run: its access log was off."
            )
    if options.json:
        write_json(options.json, results, options)
    print(
        f"\ncommand: python benchmarks/run.py {' '.join(argv or sys.argv[1:])}".rstrip()
        + f"   total time {(time.monotonic() - started) / 60:.1f} min"
    )
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
