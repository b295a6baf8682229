"""/ogcapi against pygeoapi, the OGC API - Features reference implementation,
serving the same 100,000 points, and a deep page against the first.

For each database (SQLite, PostgreSQL), in one run:

1. seeds one map of ``--locations`` locations into a scratch mapapi
   database (bulk inserts through the app's tables, ``harness.data``) and
   starts ``mapapi serve`` (8 threads);
2. exports the map as GeoJSON from mapapi and loads it with ``ogr2ogr``
   into what pygeoapi's own provider reads, as its docs configure it: a
   GeoPackage for ``SQLiteGPKG`` (SpatiaLite), a PostGIS table for
   ``PostgreSQL``; then serves it from pygeoapi's Flask app under waitress,
   one process of 8 threads as mapapi's;
3. checks both answer the same Features to the same bbox query, then
   measures requests per second in turns (each scenario on each server for
   ``--seconds`` at a time, ``--rounds`` rounds, the order reversed each
   round) with ``--clients`` keep-alive connections: items pages of 1,000,
   and bbox queries (a box around the map's city, up to 1,000 Features);
   and mapapi's 100th page of 100 (by its ``next`` cursor) against its
   first. A ratio is the median of the rounds' ratios.

    python benchmarks/ogcapi.py --pygeoapi /path/to/venv/bin/python

``--pygeoapi`` is a Python with ``pygeoapi``, ``waitress`` and, for
PostgreSQL, ``psycopg2`` and ``geoalchemy2`` installed (never a dependency
of mapapi), whose ``sqlite3`` can load ``mod_spatialite`` (Debian's
``/usr/bin/python3 -m venv`` can; ``libsqlite3-mod-spatialite``). PostgreSQL
needs PostGIS installed (``postgresql-15-postgis-3``) and
``MAPAPI_DATABASE_URL`` naming a server where the user may create databases;
``ogr2ogr`` comes with ``gdal-bin``. Progress goes to stderr, the table to
stdout.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.data import Seeder, analyze_postgres, create_schema, database_for, make_app  # noqa: E402
from harness.servers import (  # noqa: E402
    Processes,
    free_port,
    start_app_server,
    tail,
    wait_until_serving,
)
from harness.settings import SERVER_THREADS, progress  # noqa: E402

TARGET_PEER = 3.0
TARGET_DEEP = 1.5
PEER_CONFIG = """\
server:
  bind: {{host: 127.0.0.1, port: {port}}}
  url: http://127.0.0.1:{port}
  mimetype: application/json; charset=UTF-8
  encoding: utf-8
  language: en-US
  limits: {{default_items: 100, max_items: 10000}}
  map: {{url: "https://tile.openstreetmap.org/{{z}}/{{x}}/{{y}}.png", attribution: OSM}}
logging:
  level: ERROR
metadata:
  identification:
    title: benchmark
    description: the same points as mapapi's map
    keywords: [benchmark]
    keywords_type: theme
    terms_of_service: https://example.org
    url: https://example.org
  license: {{name: CC-BY 4.0 license, url: "https://creativecommons.org/licenses/by/4.0/"}}
  provider: {{name: benchmark, url: "https://example.org"}}
  contact: {{name: benchmark, position: none, address: none, city: none, stateorprovince: none,
            postalcode: none, country: none, phone: none, fax: none, email: none, url: none,
            hours: none, instructions: none, role: pointOfContact}}
resources:
  points:
    type: collection
    title: points
    description: the same points as mapapi's map
    keywords: [points]
    links: []
    extents:
      spatial: {{bbox: [-180, -90, 180, 90], crs: http://www.opengis.net/def/crs/OGC/1.3/CRS84}}
    providers:
      - type: feature
{provider}
"""
SQLITE_PROVIDER = """\
        name: SQLiteGPKG
        data: {data}
        id_field: id
        table: points
"""
POSTGRES_PROVIDER = """\
        name: PostgreSQL
        data: {{host: {host}, port: {port}, dbname: {dbname}, user: {user}, password: "{password}", search_path: [public]}}
        id_field: id
        table: points
        geom_field: geom
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pygeoapi", required=True, help="a Python with pygeoapi installed")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--locations", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=4)
    options = parser.parse_args()
    rows = []
    for backend in options.backends.split(","):
        with tempfile.TemporaryDirectory(prefix="ogcapi-bench-") as folder:
            rows.extend(measure_backend(backend, Path(folder), options))
    print(f"\n{'database':10} {'scenario':34} {'mapapi rps':>11} {'other rps':>10} {'ratio':>7}  target")
    for row in rows:
        print(
            f"{row['backend']:10} {row['scenario']:34} {row['mapapi']:11.1f} {row['other']:10.1f} "
            f"{row['ratio']:7.2f}  {row['target']}"
        )


def measure_backend(backend: str, workdir: Path, options) -> list[dict]:
    processes = Processes()
    with database_for(backend, workdir) as database_url:
        try:
            secret, map_id = seed(database_url, options.locations)
            mapapi = start_app_server(processes, database_url, workdir, f"ogcapi-{backend}")
            headers = {"Authorization": f"Bearer {secret}"}
            export = workdir / "export.geojson"
            with requests.get(
                f"{mapapi.base_url}/api/v1/maps/{map_id}/locations.geojson",
                headers=headers, stream=True, timeout=600,
            ) as answer:
                answer.raise_for_status()
                with open(export, "wb") as out:
                    for chunk in answer.iter_content(1 << 20):
                        out.write(chunk)
            peer = start_peer(processes, backend, database_url, export, workdir, options)
            return compare(backend, mapapi.base_url, peer, map_id, headers, options)
        except SystemExit:
            for log in sorted(workdir.glob("*.log")):
                progress(f"--- {log.name}:\n{tail(log)}")
            raise
        finally:
            processes.stop_all()


def seed(database_url: str, count: int) -> tuple[str, str]:
    """An account, its key and one map of ``count`` locations: ``(secret, map id)``."""
    import random

    from mapapi.config import engine_options
    from mapapi.extensions import db
    from mapapi.services import accounts
    from mapapi.services.keys import issue_key

    started = time.monotonic()
    # The service's PostgreSQL time-outs (statements of 30 s, 10 s without
    # an answer) are for requests, not for one insert of 100,000 rows on a
    # loaded machine.
    options = engine_options(database_url, 1)
    options.pop("connect_args", None)
    app = make_app(database_url, SQLALCHEMY_ENGINE_OPTIONS=options)
    create_schema(app)
    with app.app_context():
        account = accounts.create_account("bench@example.com", "pro")
        secret = issue_key(account, "benchmark", "READ_WRITE").secret
        db.session.commit()
        with db.engine.begin() as connection:
            seeded = Seeder(connection, random.Random(39)).add_map(account.id, "Points", count)
        if db.engine.dialect.name == "postgresql":
            analyze_postgres(db.engine)
        db.engine.dispose()
    progress(f"  seeded {count} locations in {time.monotonic() - started:.1f} s")
    return secret, seeded.id


def start_peer(processes, backend: str, database_url: str, export: Path, workdir: Path, options) -> str:
    """pygeoapi serving ``export``'s points from its own provider: its base URL."""
    started = time.monotonic()
    if backend == "sqlite":
        data = workdir / "points.gpkg"
        ogr2ogr("-f", "GPKG", str(data), str(export), "-nln", "points")
        provider = SQLITE_PROVIDER.format(data=data)
    else:
        url = urlsplit(database_url.replace("postgresql+psycopg", "postgresql"))
        dbname = url.path.lstrip("/")
        connection = f"PG:host={url.hostname} port={url.port or 5432} dbname={dbname} user={url.username}"
        if url.password:
            connection += f" password={url.password}"
        subprocess.run(
            ["psql", "-h", url.hostname, "-p", str(url.port or 5432), "-U", url.username, "-d", dbname,
             "-qc", "CREATE EXTENSION IF NOT EXISTS postgis"],
            check=True, env={**os.environ, "PGPASSWORD": url.password or ""},
        )  # fmt: skip
        ogr2ogr("-f", "PostgreSQL", connection, str(export), "-nln", "points", "-lco", "GEOMETRY_NAME=geom")
        provider = POSTGRES_PROVIDER.format(
            host=url.hostname, port=url.port or 5432, dbname=dbname, user=url.username,
            password=url.password or "",
        )  # fmt: skip
    port = free_port()
    config = workdir / "pygeoapi.yml"
    config.write_text(PEER_CONFIG.format(port=port, provider=provider))
    document = workdir / "pygeoapi-openapi.yml"
    environment = {**os.environ, "PYGEOAPI_CONFIG": str(config), "PYGEOAPI_OPENAPI": str(document)}
    subprocess.run(
        [str(Path(options.pygeoapi).with_name("pygeoapi")), "openapi", "generate", str(config),
         "--output-file", str(document)],
        check=True, env=environment, capture_output=True,
    )  # fmt: skip
    log_path = workdir / f"pygeoapi-{backend}.log"
    # pygeoapi's SQLite provider shares one cursor between requests: two
    # threads at once fail ("no such table: vgpkg_points"), so one thread.
    threads = 1 if backend == "sqlite" else SERVER_THREADS
    serve = (
        "import waitress; from pygeoapi.flask_app import APP; "
        f"waitress.serve(APP, host='127.0.0.1', port={port}, threads={threads})"
    )
    process = processes.start([options.pygeoapi, "-c", serve], environment, log_path)
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(process, base + "/collections/points", log_path, timeout=120)
    progress(f"  pygeoapi ({backend}) loaded and serving in {time.monotonic() - started:.1f} s")
    return base


def ogr2ogr(*arguments: str) -> None:
    result = subprocess.run(["ogr2ogr", *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"ogr2ogr failed: {result.stderr[-2000:]}")


def compare(backend: str, mapapi: str, peer: str, map_id: str, headers: dict, options) -> list[dict]:
    items = f"{mapapi}/ogcapi/collections/{map_id}/items"
    first = requests.get(items, params={"limit": 1}, headers=headers, timeout=60).json()["features"][0]
    lng, lat = first["geometry"]["coordinates"]
    box = f"{lng - 0.002:.4f},{lat - 0.002:.4f},{lng + 0.002:.4f},{lat + 0.002:.4f}"
    ours = requests.get(items, params={"bbox": box, "limit": 1000}, headers=headers, timeout=60).json()
    theirs = requests.get(
        f"{peer}/collections/points/items", params={"bbox": box, "limit": 1000, "f": "json"}, timeout=60
    ).json()
    ours_ids = {feature["id"] for feature in ours["features"]}
    theirs_ids = {feature["properties"].get("id", feature.get("id")) for feature in theirs["features"]}
    if ours_ids != theirs_ids or not ours_ids:
        raise SystemExit(f"the two servers disagree on bbox={box}: {len(ours_ids)} vs {len(theirs_ids)}")
    progress(f"  bbox {box}: {len(ours_ids)} Features on both")
    deep = requests.get(items, params={"limit": 100}, headers=headers, timeout=60).json()
    for _ in range(min(99, options.locations // 100 - 1)):
        deep = requests.get(next_link(deep), headers=headers, timeout=60).json()
    deep_url = next(link["href"] for link in deep["links"] if link["rel"] == "self")
    pairs = {
        "items, page of 1,000": (
            (items + "?limit=1000", headers),
            (peer + "/collections/points/items?limit=1000&f=json", {}),
            f"mapapi >= {TARGET_PEER}x pygeoapi",
        ),
        f"bbox ({len(ours_ids)} Features)": (
            (f"{items}?bbox={box}&limit=1000", headers),
            (f"{peer}/collections/points/items?bbox={box}&limit=1000&f=json", {}),
            f"mapapi >= {TARGET_PEER}x pygeoapi",
        ),
        "100th page of 100 vs the first": (
            (deep_url, headers),
            (items + "?limit=100", headers),
            f"deep >= first / {TARGET_DEEP}",
        ),
    }
    rows = []
    for scenario, (a, b, target) in pairs.items():
        ratios, rates = [], {0: [], 1: []}
        for round_ in range(options.rounds):
            order = (0, 1) if round_ % 2 == 0 else (1, 0)
            measured = {}
            for side in order:
                url, sent = (a, b)[side]
                measured[side] = rate(url, sent, options.seconds, options.clients)
                rates[side].append(measured[side])
            ratios.append(measured[0] / measured[1])
        ratio = statistics.median(ratios)
        progress(f"  {backend} {scenario}: {statistics.mean(rates[0]):.1f} vs {statistics.mean(rates[1]):.1f} rps, ratio {ratio:.2f}")
        met = ratio >= (TARGET_PEER if "pygeoapi" in target else 1 / TARGET_DEEP)
        rows.append(
            {
                "backend": backend,
                "scenario": scenario,
                "mapapi": statistics.mean(rates[0]),
                "other": statistics.mean(rates[1]),
                "ratio": ratio,
                "target": f"{target}: {'met' if met else 'NOT met'}",
            }
        )
    return rows


def next_link(page: dict) -> str:
    return next(link["href"] for link in page["links"] if link["rel"] == "next")


def rate(url: str, headers: dict, seconds: float, clients: int) -> float:
    """Requests per second answered 200 by ``url`` with ``clients`` keep-alive connections."""
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    done, failures = [0] * clients, []
    deadline = time.monotonic() + seconds

    def client(index: int) -> None:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        while time.monotonic() < deadline:
            connection.request("GET", target, headers=headers)
            answer = connection.getresponse()
            answer.read()
            if answer.status != 200:
                failures.append(answer.status)
                return
            done[index] += 1
        connection.close()

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"{url} answered {failures[0]}")
    return sum(done) / (time.monotonic() - started)


if __name__ == "__main__":
    main()
