"""A real sync, end to end: a CSV file mirrored into a map over HTTP (a
waitress server), with upserts of 1000 and bulk deletes, as an integration
that runs every night would do it with the recipe of docs/api.md."""

import csv
import io
import random
import time
import uuid

import pytest
import requests

from .factories import API, make_map
from .test_events import latest, read_feed

FIELDS = ("id", "name", "lat", "lng", "address")


def make_rows(count: int, rng: random.Random) -> list[dict]:
    return [new_row(number, rng) for number in range(count)]


def new_row(number: int, rng: random.Random) -> dict:
    return {
        "id": f"CRM-{number:05d}",
        "name": f"Customer {number}",
        "lat": f"{rng.uniform(-80, 80):.6f}",
        "lng": f"{rng.uniform(-170, 170):.6f}",
        "address": f"{rng.randint(1, 999)} Main Street",
    }


def to_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


class SyncJob:
    """What a client of the API writes (the recipe of docs/api.md): read the
    file, upsert every row by its id, 1000 a request, delete what the file
    no longer has; each write retried with its own Idempotency-Key, a 429
    waited out."""

    def __init__(self, base: str, key: str, map_id: str):
        self.base = f"{base}{API}/maps/{map_id}"
        self.url = f"{self.base}/locations"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {key}"
        self.waited = 0

    def run(self, csv_text: str) -> dict:
        rows = list(csv.DictReader(io.StringIO(csv_text)))
        totals = {"created": 0, "updated": 0, "unchanged": 0, "deleted": 0, "requests": 0}
        for start in range(0, len(rows), 1000):
            items = [
                {
                    "externalId": row["id"],
                    "name": row["name"],
                    "lat": float(row["lat"]),
                    "lng": float(row["lng"]),
                    "address": row["address"],
                }
                for row in rows[start : start + 1000]
            ]
            answer = self.post("upsert", {"locations": items})
            for count in ("created", "updated", "unchanged"):
                totals[count] += answer[count]
            totals["requests"] += 1
        in_file = {row["id"] for row in rows}
        gone = [external_id for external_id in self.external_ids() if external_id not in in_file]
        for start in range(0, len(gone), 1000):
            totals["deleted"] += self.post(
                "bulk-delete", {"externalIds": gone[start : start + 1000]}
            )["count"]
            totals["requests"] += 1
        return totals

    def post(self, action: str, body: dict) -> dict:
        headers = {"Idempotency-Key": str(uuid.uuid4())}
        while True:
            response = self.session.post(
                f"{self.url}/{action}", json=body, headers=headers, timeout=60
            )
            if response.status_code != 429:
                break
            self.waited += 1
            time.sleep(int(response.headers["Retry-After"]))
        assert response.status_code == 200, response.text[:500]
        return response.json()["data"]

    def listing(self) -> list[dict]:
        locations, page = [], 1
        while True:
            response = self.session.get(
                self.url, params={"page": page, "pageSize": 100}, timeout=60
            )
            assert response.status_code == 200, response.text[:500]
            body = response.json()["data"]
            locations += body["locations"]
            if page >= body["pagination"]["totalPages"]:
                return locations
            page += 1

    def external_ids(self) -> list[str]:
        export = self.session.get(f"{self.base}/locations.geojson", timeout=60).json()
        found = [feature["properties"]["externalId"] for feature in export["features"]]
        return [external_id for external_id in found if external_id is not None]


def as_file(locations: list[dict]) -> dict[str, tuple]:
    """The map seen as the file's rows, by id."""
    return {
        loc["externalId"]: (loc["name"], f"{loc['lat']:.6f}", f"{loc['lng']:.6f}", loc["address"])
        for loc in locations
    }


def file_rows(rows: list[dict]) -> dict[str, tuple]:
    return {row["id"]: (row["name"], row["lat"], row["lng"], row["address"]) for row in rows}


def test_a_csv_file_is_mirrored_into_a_map_and_kept_in_step(api, live_server):
    rng = random.Random(23)
    map_id = make_map(api, title="CRM mirror")["id"]
    job = SyncJob(live_server, api.key, map_id)
    rows = make_rows(1000, rng)

    first = job.run(to_csv(rows))
    assert first == {"created": 1000, "updated": 0, "unchanged": 0, "deleted": 0, "requests": 1}
    assert as_file(job.listing()) == file_rows(rows)

    # The other system changes 10 rows, deletes 5 and adds 5.
    for row in rng.sample(rows[:500], 10):
        row["name"] += " (renamed)"
    for row in rng.sample(rows[500:], 5):
        rows.remove(row)
    rows += [new_row(number, rng) for number in range(1000, 1005)]
    before = {loc["externalId"]: loc for loc in job.listing()}
    cursor = latest(api)

    second = job.run(to_csv(rows))
    assert second == {"created": 5, "updated": 10, "unchanged": 985, "deleted": 5, "requests": 2}
    after = job.listing()
    assert as_file(after) == file_rows(rows)
    moved = {
        loc["externalId"]
        for loc in after
        if loc["updatedAt"] != before.get(loc["externalId"], {}).get("updatedAt")
    }
    assert len(moved) == 15  # the 10 changed and the 5 new, nothing else
    # The feed shows exactly those 20 changes, each with what a GET shows.
    events = read_feed(api, after=cursor)
    by_type = {kind: [] for kind in ("location.created", "location.updated", "location.deleted")}
    for event in events:
        by_type[event["type"]].append(event["data"])
    assert len(events) == 20
    now = {loc["externalId"]: loc for loc in after}
    assert sorted(d["externalId"] for d in by_type["location.created"]) == sorted(
        set(now) - set(before)
    )
    assert sorted(d["externalId"] for d in by_type["location.updated"]) == sorted(
        external_id for external_id in moved if external_id in before
    )
    for data in by_type["location.created"] + by_type["location.updated"]:
        assert data == now[data["externalId"]]
    gone = {before[external_id]["id"] for external_id in set(before) - set(now)}
    assert len(gone) == 5
    assert {d["id"] for d in by_type["location.deleted"]} == gone
    assert all(d == {"id": d["id"], "mapId": map_id} for d in by_type["location.deleted"])
    cursor = latest(api)

    third = job.run(to_csv(rows))
    assert third == {"created": 0, "updated": 0, "unchanged": 1000, "deleted": 0, "requests": 1}
    assert job.listing() == after  # no updatedAt moved, nothing else either
    assert read_feed(api, after=cursor) == []  # and no event was recorded


@pytest.fixture
def small_sync_bucket(app_config):
    """Two sync requests a second: a job of three meets a 429 (before ``app`` is built)."""
    app_config["RATELIMIT_SYNC"] = "2 per 2 seconds"


def test_the_recipe_waits_out_a_429_and_finishes(small_sync_bucket, api, live_server):
    rng = random.Random(5)
    map_id = make_map(api, title="Limited")["id"]
    job = SyncJob(live_server, api.key, map_id)
    rows = make_rows(2500, rng)
    assert job.run(to_csv(rows))["created"] == 2500
    assert job.waited >= 1
    assert as_file(job.listing()) == file_rows(rows)
