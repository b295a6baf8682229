"""``mapapi sync``, run as a user runs it: a process against a live ``mapapi serve``.

Each test starts a server on the suite's backend (SQLite, or PostgreSQL with
rate limits in Redis), writes its own files, runs the command and compares
the map, read back through the GeoJSON export, with the file.
"""

import csv
import fcntl
import io
import json
import os
import pty
import random
import signal
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
import requests

from .helpers import mapapi_program, served_mapapi, wait_until

API = "/api/v1"
SUMMARY = "created {}, updated {}, deleted {}, unchanged {} in "


class Service:
    """A served mapapi, its key, and the helpers a test needs around the command."""

    def __init__(self, server, key: str, workdir: Path):
        self.server, self.key, self.workdir = server, key, workdir
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {key}"

    def url(self, path: str) -> str:
        return f"{self.server.base}{API}{path}"

    def post(self, path: str, body: dict) -> dict:
        response = self.http.post(self.url(path), json=body, timeout=30)
        assert response.status_code in (200, 201), response.text
        return response.json()["data"]

    def new_map(self) -> str:
        return self.post("/maps", {"title": "Mirror"})["id"]

    def features(self, map_id: str) -> list[dict]:
        response = self.http.get(self.url(f"/maps/{map_id}/locations.geojson"), timeout=60)
        assert response.status_code == 200, response.text
        return response.json()["features"]

    def by_external_id(self, map_id: str) -> dict[str, dict]:
        found = {}
        for feature in self.features(map_id):
            properties = feature["properties"]
            lng, lat = feature["geometry"]["coordinates"]
            found[properties["externalId"]] = {
                **properties,
                "lat": lat,
                "lng": lng,
                "id": feature["id"],
            }
        return found

    def sync(self, path, *options, env=None, stdin=None) -> subprocess.CompletedProcess:
        environment = {**self.env(), **(env or {})}
        return subprocess.run(
            [mapapi_program(), "sync", str(path), *options],
            env=environment, input=stdin, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    def start_sync(self, path, *options) -> subprocess.Popen:
        return subprocess.Popen(
            [mapapi_program(), "sync", str(path), *options],
            env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def env(self) -> dict:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("MAPAPI_")}
        return {**environment, "MAPAPI_KEY": self.key, "MAPAPI_URL": self.server.base}

    def access_lines(self) -> list[dict]:
        lines = self.server.stderr_path.read_text().splitlines()
        return [
            json.loads(line.split("mapapi.access: ", 1)[1])
            for line in lines
            if "mapapi.access: " in line
        ]

    def mark(self) -> int:
        """The position in the access log of a request made now: the log is
        written in batches, so a count is taken between two marks."""
        self.marks = getattr(self, "marks", 0) + 1
        path = f"{API}/maps/mark{self.marks}"
        self.http.get(self.server.base + path, timeout=10)

        def position():
            paths = [line["path"] for line in self.api_lines()]
            return paths.index(path) if path in paths else None

        assert wait_until(lambda: position() is not None, seconds=30), "the access log lags"
        return position()

    def requests_between(self, first: int, last: int) -> list[tuple[str, str, int]]:
        return [(l["method"], l["path"], l["status"]) for l in self.api_lines()[first + 1 : last]]

    def api_lines(self) -> list[dict]:
        return [line for line in self.access_lines() if line["path"].startswith(API)]


@pytest.fixture
def service(tmp_path):
    with served_mapapi(tmp_path, MAPAPI_WEBHOOKS_DELIVER="0") as (server, key):
        yield Service(server, key, tmp_path)


def limited_service(tmp_path, rate: str):
    return served_mapapi(tmp_path, MAPAPI_WEBHOOKS_DELIVER="0", MAPAPI_RATELIMIT_SYNC=rate)


def write_csv(path: Path, rows: list[list], *, delimiter=",", bom=False) -> Path:
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + out.getvalue().encode())
    return path


def customers(count: int, seed: int = 5) -> list[list]:
    rng = random.Random(seed)
    rows = [["externalId", "name", "lat", "lng", "address", "segment"]]
    for number in range(count):
        rows.append([
            f"C{number:05d}", f"Customer {number}", f"{rng.uniform(-80, 80):.6f}",
            f"{rng.uniform(-170, 170):.6f}", f"{number} Main St", rng.choice(["a", "b"]),
        ])  # fmt: skip
    return rows


def assert_map_is(service: Service, map_id: str, rows: list[list]) -> None:
    """The map's located by externalId hold exactly the rows (header first)."""
    header, *body = rows
    on_map = service.by_external_id(map_id)
    assert len(service.features(map_id)) == len(on_map)  # every location has its externalId
    assert set(on_map) == {row[0] for row in body}
    for row in body:
        cells = dict(zip(header, row, strict=True))
        location = on_map[cells["externalId"]]
        assert location["name"] == cells["name"]
        assert (location["lat"], location["lng"]) == (float(cells["lat"]), float(cells["lng"]))
        assert location["address"] == cells["address"]
        assert location["properties"] == {"segment": cells["segment"]}


def summary(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    return result.stdout.strip().splitlines()[-1]


# --- the runs of a nightly job ------------------------------------------------------------


def test_first_load_unchanged_rerun_then_edits_and_deletions(service, tmp_path):
    map_id = service.new_map()
    rows = customers(2500)
    path = write_csv(tmp_path / "crm.csv", rows)

    first = service.sync(path, "--map", map_id)
    assert summary(first).startswith(SUMMARY.format(2500, 0, 0, 0))
    assert [line for line in first.stdout.splitlines() if line.startswith("upsert ")] == [
        line for line in first.stdout.splitlines() if " rows done, " in line
    ] and first.stdout.count("upsert ") == 3  # 1000, 1000, 500: a line per batch in a pipe
    assert_map_is(service, map_id, rows)

    before = service.mark()
    again = service.sync(path, "--map", map_id)
    assert summary(again).startswith(SUMMARY.format(0, 0, 0, 2500))
    assert service.requests_between(before, service.mark()) == [
        ("GET", f"{API}/maps/{map_id}", 200),
        ("GET", f"{API}/maps/{map_id}/locations.geojson", 200),
    ]

    updated_at = {key: loc["updatedAt"] for key, loc in service.by_external_id(map_id).items()}
    rows[10][1] = "Renamed"  # a name
    rows[20][2] = "12.5"  # a latitude
    rows[30][5] = "c"  # a property
    del rows[40:45]  # five gone
    rows.append(["N1", "New", "1", "2", "1 New St", "a"])
    edited = write_csv(tmp_path / "crm.csv", rows)
    kept = service.sync(edited, "--map", map_id)
    assert summary(kept).startswith(SUMMARY.format(1, 3, 0, 2492))
    on_map = service.by_external_id(map_id)
    assert len(on_map) == 2501  # without --prune, nothing is deleted
    pruned = service.sync(edited, "--map", map_id, "--prune")
    assert summary(pruned).startswith(SUMMARY.format(0, 0, 5, 2496))
    assert_map_is(service, map_id, rows)
    moved = {
        key
        for key, loc in service.by_external_id(map_id).items()
        if updated_at.get(key) != loc["updatedAt"]
    }
    assert moved == {rows[10][0], rows[20][0], rows[30][0], "N1"}  # only what changed


def test_odd_csv_dialects_are_read_as_written(service, tmp_path):
    map_id = service.new_map()
    tags = [service.post(f"/maps/{map_id}/tags", {"name": n})["id"] for n in ("t1", "t2")]
    header = ["externalId", "name", "latitude", "lon", "tagIds", "notes"]
    rows = [
        header,
        [
            "A1",
            "Café, Bar; and more",
            "48.85",
            "2.35",
            f"{tags[0]};{tags[1]}",
            "two\nlines, quoted",
        ],
        ["A2", 'The "Quoted" One', "-33.9", "151.2", "", ""],
    ]
    for number, (delimiter, bom) in enumerate([(",", True), (";", False), ("\t", True)]):
        path = write_csv(tmp_path / f"odd{number}.csv", rows, delimiter=delimiter, bom=bom)
        result = service.sync(path, "--map", map_id)
        expected = (2, 0) if number == 0 else (0, 2)
        assert summary(result).startswith(SUMMARY.format(expected[0], 0, 0, expected[1])), path
    on_map = service.by_external_id(map_id)
    assert on_map["A1"]["name"] == "Café, Bar; and more"
    assert on_map["A1"]["tagIds"] == tags
    assert on_map["A1"]["properties"] == {"notes": "two\nlines, quoted"}
    assert on_map["A2"]["name"] == 'The "Quoted" One' and on_map["A2"]["properties"] == {}
    assert (on_map["A2"]["lat"], on_map["A2"]["lng"]) == (-33.9, 151.2)


def test_standard_input_and_geojson_are_read_too(service, tmp_path):
    map_id = service.new_map()
    collection = {
        "type": "FeatureCollection",
        "features": [
            {"type": "Feature", "id": "G1", "geometry": {"type": "Point", "coordinates": [2.35, 48.85]},
             "properties": {"name": "Paris", "website": "https://example.com"}},
            {"type": "Feature", "geometry": {"type": "Point", "coordinates": [-0.12, 51.5, 30]},
             "properties": {"name": "London", "externalId": "G2", "description": "big"}},
        ],
    }  # fmt: skip
    path = tmp_path / "places.geojson"
    path.write_text(json.dumps(collection))
    assert summary(service.sync(path, "--map", map_id)).startswith(SUMMARY.format(2, 0, 0, 0))
    collection["features"][1]["properties"]["description"] = "bigger"
    result = service.sync("-", "--map", map_id, stdin=json.dumps(collection))
    assert summary(result).startswith(SUMMARY.format(0, 1, 0, 1))
    on_map = service.by_external_id(map_id)
    assert on_map["G1"]["properties"] == {"website": "https://example.com"}
    assert on_map["G2"]["description"] == "bigger" and on_map["G2"]["lat"] == 51.5


def test_dry_run_prints_the_plan_and_writes_nothing(service, tmp_path):
    map_id = service.new_map()
    rows = customers(8)
    path = write_csv(tmp_path / "crm.csv", rows)
    summary(service.sync(path, "--map", map_id))
    rows[1][1] = "Renamed"
    del rows[2]
    rows.append(["N1", "New", "1", "2", "x", "a"])
    write_csv(path, rows)
    on_map = service.by_external_id(map_id)
    before = service.mark()
    result = service.sync(path, "--map", map_id, "--prune", "--dry-run")
    assert summary(result).startswith(SUMMARY.format(1, 1, 1, 6))
    assert result.stdout.strip().endswith("(dry run: nothing was written)")
    assert "  create line 9: N1 'New'" in result.stdout
    assert "  update line 2: C00000 (name)" in result.stdout
    assert "  delete C00001 'Customer 1'" in result.stdout
    sent = service.requests_between(before, service.mark())
    # The map, its export and what the sync bucket has left (which uses up nothing).
    assert [method for method, _path, _status in sent] == ["GET", "GET", "GET"]
    assert sent[-1][1].endswith("/rate-limits")
    assert service.by_external_id(map_id) == on_map


def test_prune_never_touches_locations_without_an_external_id(service, tmp_path):
    map_id = service.new_map()
    loose = service.post(f"/maps/{map_id}/locations", {"name": "Hand-made", "lat": 1, "lng": 1})
    service.post(
        f"/maps/{map_id}/locations", {"name": "Old", "lat": 1, "lng": 1, "externalId": "OLD"}
    )
    path = write_csv(tmp_path / "one.csv", [["id", "name", "lat", "lng"], ["K1", "Kept", "3", "4"]])
    result = service.sync(path, "--map", map_id, "--prune")
    assert summary(result).startswith(SUMMARY.format(1, 0, 1, 0))
    names = {f["properties"]["name"]: f["id"] for f in service.features(map_id)}
    assert names == {"Hand-made": loose["id"], "Kept": names["Kept"]}


# --- refusals --------------------------------------------------------------------------------


def test_a_file_with_bad_rows_writes_nothing_and_names_each(service, tmp_path):
    map_id = service.new_map()
    rows = [
        ["externalId", "name", "lat", "lng", "description"],
        ["A", "Good", "1", "2", ""],
        ["B", "Far north", "95", "2", ""],
        ["C", "", "1", "2", ""],
        ["A", "Twice", "1", "2", ""],
        ["D", "Comma", "1,5", "2", ""],
        ["E", "Long", "1", "2", "x" * 10_001],
        ["F", "Both wrong", "91", "181", ""],
    ]
    before = service.mark()
    result = service.sync(write_csv(tmp_path / "bad.csv", rows), "--map", map_id)
    assert result.returncode == 1, result.stderr
    errors = result.stderr.strip().splitlines()
    assert "line 3: lat: must be between -90 and 90" in errors
    assert "line 4: name: required" in errors
    assert "line 5: externalId: 'A' is also on line 2" in errors
    assert any(e.startswith("line 6: lat: must be a decimal number") for e in errors)
    assert any(
        e.startswith("line 7: description: length must be between 0 and 10000") for e in errors
    )
    assert "line 8: lat: must be between -90 and 90" in errors
    assert "line 8: lng: must be between -180 and 180" in errors
    assert (
        errors[-1] == f"error: 6 lines of {tmp_path / 'bad.csv'} are invalid; nothing was written"
    )
    sent = service.requests_between(before, service.mark())
    assert [method for method, _path, _status in sent] == ["GET", "GET"]
    assert service.features(map_id) == []


def test_rows_the_map_refuses_are_named_before_anything_is_written(service, tmp_path):
    map_id = service.new_map()
    rows = [["externalId", "name", "lat", "lng", "categoryId"], ["A", "x", "1", "2", "nope"]]
    result = service.sync(write_csv(tmp_path / "ref.csv", rows), "--map", map_id)
    assert result.returncode == 1
    assert "line 2: categoryId: 'nope' is not one of the map's categories" in result.stderr
    only_ids = write_csv(tmp_path / "ids.csv", [["externalId", "address"], ["NEW", "1 Rd"]])
    result = service.sync(only_ids, "--map", map_id)
    assert result.returncode == 1
    assert "line 2: name: required to create a location" in result.stderr
    assert service.features(map_id) == []


@pytest.mark.parametrize(
    ("options", "env", "status", "words"),
    [
        ((), {"MAPAPI_KEY": ""}, 2, "MAPAPI_KEY"),
        ((), {"MAPAPI_URL": "ftp://x"}, 2, "MAPAPI_URL"),
        (("--bogus",), {}, 2, "--bogus"),
        (("--map", "NoSuchMap0000000000000"), {}, 1, "NOT_FOUND"),
        (("--map", "M", "--id-column", "code"), {}, 1, "'code'"),
    ],
)
def test_bad_options_exit_2_and_file_or_api_errors_1(
    service, tmp_path, options, env, status, words
):
    path = write_csv(tmp_path / "f.csv", customers(2))
    arguments = options if "--map" in options or "--bogus" in options else ("--map", "M")
    result = service.sync(path, *arguments, env=env)
    assert result.returncode == status, (result.stdout, result.stderr)
    assert words in result.stderr
    if status == 1:  # the error, on one line
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert service.key not in result.stderr + result.stdout


def test_a_missing_file_is_a_file_error(service, tmp_path):
    result = service.sync(tmp_path / "nope.csv", "--map", "M")
    assert result.returncode == 1 and "nope.csv" in result.stderr


# --- rate limits, crashes ---------------------------------------------------------------------


def test_a_429_is_waited_out_and_the_same_request_sent_again(tmp_path):
    with limited_service(tmp_path, "1 per 2 seconds") as (server, key):
        service = Service(server, key, tmp_path)
        map_id = service.new_map()
        rows = customers(2100)
        result = service.sync(write_csv(tmp_path / "crm.csv", rows), "--map", map_id)
        assert summary(result).startswith(SUMMARY.format(2100, 0, 0, 0))
        assert "rate limited (429), Retry-After" in result.stdout
        assert_map_is(service, map_id, rows)

        def upserts():
            return [
                line["status"] for line in service.api_lines() if line["path"].endswith("/upsert")
            ]

        assert wait_until(lambda: upserts().count(200) == 3, seconds=20), upserts()
        assert 429 in upserts() and set(upserts()) == {200, 429}


def test_a_run_killed_half_way_then_run_again_finishes_the_job(tmp_path):
    with limited_service(tmp_path, "1 per 3 seconds") as (server, key):
        service = Service(server, key, tmp_path)
        map_id = service.new_map()
        rows = customers(2600)
        path = write_csv(tmp_path / "crm.csv", rows)
        process = service.start_sync(path, "--map", map_id)
        try:
            first_line = process.stdout.readline()  # the plan
            assert "create 2600" in first_line, first_line
            assert process.stdout.readline().startswith("requests: 3 to the sync bucket")
            batch = process.stdout.readline()  # the first upsert done; the next waits
            assert batch.startswith("upsert 1/3"), batch
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)
        done = len(service.features(map_id))
        assert 1000 <= done < 2600
        result = service.sync(path, "--map", map_id)
        assert summary(result).startswith(SUMMARY.format(2600 - done, 0, 0, done))
        assert_map_is(service, map_id, rows)


def test_on_a_terminal_a_progress_bar_shows_rows_rate_and_time_left(service, tmp_path):
    map_id = service.new_map()
    path = write_csv(tmp_path / "crm.csv", customers(1500))
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(
        [mapapi_program(), "sync", str(path), "--map", map_id],
        env=service.env(), stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal,
    )  # fmt: skip
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert process.wait(timeout=60) == 0, shown
    text = shown.decode()
    assert "1500/1500" in text and "row/s" in text and "100%" in text
    assert "upsert 1/2" not in text  # the bar, not a line per batch
    assert text.strip().splitlines()[-1].startswith(SUMMARY.format(1500, 0, 0, 0))


# --- the command itself ---------------------------------------------------------------------


def test_the_command_starts_without_the_server_stack():
    probe = (
        "import sys, mapapi.filesync.command; "
        "print(sorted(m for m in ('flask', 'sqlalchemy', 'werkzeug') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_command_is_listed_in_the_help(tmp_path):
    result = subprocess.run(
        [mapapi_program(), "--help"], capture_output=True, text=True, timeout=60
    )
    assert "sync" in result.stdout
    own = subprocess.run(
        [mapapi_program(), "sync", "--help"], capture_output=True, text=True, timeout=60
    )
    assert "--prune" in own.stdout and "--dry-run" in own.stdout and "--id-column" in own.stdout
