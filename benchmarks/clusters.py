"""A viewport's clusters cost the same on a map of 10,000 and of 1,000,000 locations.

For each database, one scratch database holds two maps seeded with the same
distribution (``tests/seeding.py``: cities plus noise; 10,000 and
1,000,000 locations, loaded in one statement with the cells counted at the
end). ``mapapi serve`` then answers the same viewports of 1920 x 1080
pixels on both maps, side by side (small, big, small, big...), ``--rounds``
times each; the medians are compared with the contract's bound:

    big <= 3 x small + 0.05 ms x (items of the big answer - items of the small)

Memory: a fresh server answers every viewport of the small map, another the
big map's; their peak resident sets (``VmHWM``) are compared (at most 1.5
times). Writes: 20,000 locations inserted with the cell triggers on, then
20,000 with them off, into fresh maps: what the triggers add to a write.

    python benchmarks/clusters.py [--big 1000000] [--rounds 15]
    MAPAPI_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1/postgres \\
        python benchmarks/clusters.py          # SQLite, then PostgreSQL
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests
from sqlalchemy import create_engine

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from harness.data import database_for  # noqa: E402
from harness.servers import Processes, start_app_server, stop_process  # noqa: E402
from harness.settings import progress  # noqa: E402

from tests.seeding import seed_spread  # noqa: E402

WIDTH, HEIGHT = 1920, 1080
#: name: (lat, lng, zoom) of the viewport's centre.
VIEWPORTS = {
    "world": (20.0, 0.0, 2),
    "country": (46.6, 2.4, 6),
    "city": (48.8566, 2.3522, 11),
    "city edge": (48.8566, 2.75, 12),
    "street": (48.8566, 2.3522, 16),
    "deep street": (48.8566, 2.3522, 18),
    "antimeridian": (-18.1, 179.5, 7),
}
SMALL = 10_000
WRITES = 20_000


def viewport_box(lat: float, lng: float, zoom: int) -> str:
    """``bbox`` of a WIDTH x HEIGHT view centred on (lat, lng) at ``zoom``."""
    size = 256 * 2**zoom
    x = (lng + 180) / 360 * size
    phi = math.radians(lat)
    y = (1 - math.log(math.tan(phi) + 1 / math.cos(phi)) / math.pi) / 2 * size

    def to_lat(pixel_y: float) -> float:
        pixel_y = min(size, max(0.0, pixel_y))
        return math.degrees(math.atan(math.sinh(math.pi * (1 - 2 * pixel_y / size))))

    def to_lng(pixel_x: float) -> float:
        if WIDTH >= size:
            return -180.0 if pixel_x < x else 180.0
        return ((pixel_x / size * 360 - 180) + 180) % 360 - 180

    west, east = to_lng(x - WIDTH / 2), to_lng(x + WIDTH / 2)
    if WIDTH < size and east == -180.0:
        east = 180.0
    south, north = to_lat(y + HEIGHT / 2), to_lat(y - HEIGHT / 2)
    return ",".join(f"{value:.7f}" for value in (west, south, east, north))


def make_database(url: str, big: int) -> tuple[str, str, str, dict]:
    """The schema, an account and its key, the two maps; the write figures."""
    from mapapi import create_app
    from mapapi.extensions import db
    from mapapi.storage.upgrade import apply_migrations

    sys.path.insert(0, str(HERE.parent))
    from tests.factories import ApiClient, create_account, create_key

    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "RATELIMIT_STORAGE_URI": "memory://"})
    with app.app_context():
        apply_migrations()
    create_account(app, "bench@example.com")
    key = create_key(app, "bench@example.com")
    api = ApiClient(app.test_client(), key)
    small_id = api.created("/maps", {"title": "10,000"})["id"]
    big_id = api.created("/maps", {"title": f"{big:,}"})["id"]
    writes = {}
    # An engine of its own: the app's would stop a statement of a million
    # rows at its statement time-out.
    engine = create_engine(url)
    for name, counted_after in (("triggers on", False), ("triggers off", True)):
        map_id = api.created("/maps", {"title": name})["id"]
        started = time.perf_counter()
        with engine.begin() as connection:
            seed_spread(connection, map_id, WRITES, counted_after=counted_after)
        writes[name] = time.perf_counter() - started
        api.delete(f"/maps/{map_id}")
    for map_id, count in ((small_id, SMALL), (big_id, big)):
        started = time.perf_counter()
        with engine.begin() as connection:
            seed_spread(connection, map_id, count, counted_after=True)
        progress(f"  seeded {count:,} in {time.perf_counter() - started:.0f} s")
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    engine.dispose()
    with app.app_context():
        db.engine.dispose()
    return key, small_id, big_id, writes


def timed(session: requests.Session, url: str) -> tuple[float, int]:
    started = time.perf_counter()
    response = session.get(url, timeout=120)
    elapsed = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    data = response.json()["data"]
    return elapsed, len(data["clusters"]) + len(data["locations"])


def peak_memory_mb(process) -> float:
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(backend: str, big: int, rounds: int) -> bool:
    processes = Processes()
    ok = True
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        with database_for(backend, folder) as url:
            progress(f"{backend}: seeding")
            key, small_id, big_id, writes = make_database(url, big)
            session = requests.Session()
            session.headers["Authorization"] = f"Bearer {key}"
            server = start_app_server(processes, url, folder, f"{backend}-timing")
            paths = {
                name: {
                    size: f"{server.base_url}/api/v1/maps/{map_id}/locations/clusters"
                    f"?bbox={viewport_box(*where)}&zoom={where[2]}"
                    for size, map_id in (("small", small_id), ("big", big_id))
                }
                for name, where in VIEWPORTS.items()
            }
            print(f"\n{backend}: {SMALL:,} vs {big:,} locations, median of {rounds} (ms)")
            print(f"{'viewport':13} {'small':>8} {'items':>6} {'big':>8} {'items':>6} {'bound':>8}  verdict")
            for name, urls in paths.items():
                times = {"small": [], "big": []}
                items = {}
                for size in ("small", "big"):  # warm up each once
                    timed(session, urls[size])
                for _ in range(rounds):
                    for size in ("small", "big"):
                        elapsed, items[size] = timed(session, urls[size])
                        times[size].append(elapsed)
                small, large = (statistics.median(times[size]) for size in ("small", "big"))
                bound = 3 * small + 0.05 * max(0, items["big"] - items["small"])
                verdict = "met" if large <= bound else "MISSED"
                ok = ok and large <= bound
                print(f"{name:13} {small:8.2f} {items['small']:6} {large:8.2f} {items['big']:6} {bound:8.2f}  {verdict}")
            stop_process(server.process)
            peaks = {}
            for size in ("small", "big"):
                server = start_app_server(processes, url, folder, f"{backend}-{size}")
                for _ in range(3):
                    for urls in paths.values():
                        timed(session, urls[size].replace(urls[size].split("/api/")[0], server.base_url))
                peaks[size] = peak_memory_mb(server.process)
                stop_process(server.process)
            ratio = peaks["big"] / peaks["small"]
            ok = ok and ratio <= 1.5
            print(
                f"memory: peak {peaks['small']:.1f} MB serving the small map, {peaks['big']:.1f} MB "
                f"the big one: {ratio:.2f}x (at most 1.5x: {'met' if ratio <= 1.5 else 'MISSED'})"
            )
            on, off = writes["triggers on"], writes["triggers off"]
            print(
                f"writes: {WRITES:,} locations in one statement: {on:.2f} s with the cell triggers, "
                f"{off:.2f} s without (counted after): {on / off:.2f}x"
            )
            processes.stop_all()
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", choices=("sqlite", "postgresql"), help="one database only")
    arguments = parser.parse_args()
    backends = ["sqlite"] + (["postgresql"] if os.environ.get("MAPAPI_DATABASE_URL") else [])
    if arguments.only:
        backends = [arguments.only]
    results = [run(backend, arguments.big, arguments.rounds) for backend in backends]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
