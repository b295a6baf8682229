"""The per-zoom cell counts (``location_cells``): kept exactly in step with
every write of locations, by the database's triggers, on both databases."""

import math
import threading

import pytest
import requests
from sqlalchemy import text

from mapapi.extensions import db
from mapapi.storage.cells import LEVELS, TABLE, cell_of, fill_cells

from .factories import make_layer, make_location, make_map

COLUMNS = "map_id, level, x, y, count, sum_lat, sum_lng, min_lat, max_lat, min_lng, max_lng"


def cells_of(app, map_id: str) -> dict:
    with app.app_context():
        rows = db.session.execute(
            text(f"SELECT {COLUMNS} FROM {TABLE} WHERE map_id = :m"), {"m": map_id}  # noqa: S608 (constants)
        ).all()
        return {(row.level, row.x, row.y): tuple(row[4:]) for row in rows}


def counted_again(app, map_id: str) -> dict:
    """The cells as ``fill_cells`` counts them from the locations there."""
    with app.app_context():
        fill_cells(db.session.connection(), map_id)
        found = cells_of_session(map_id)
        db.session.rollback()
        return found


def cells_of_session(map_id: str) -> dict:
    rows = db.session.execute(
        text(f"SELECT {COLUMNS} FROM {TABLE} WHERE map_id = :m"), {"m": map_id}  # noqa: S608 (constants)
    ).all()
    return {(row.level, row.x, row.y): tuple(row[4:]) for row in rows}


def assert_in_step(app, map_id: str) -> dict:
    kept, expected = cells_of(app, map_id), counted_again(app, map_id)
    assert kept.keys() == expected.keys()
    for cell, values in expected.items():
        assert kept[cell][0] == values[0], cell
        assert kept[cell][1:] == pytest.approx(values[1:], abs=1e-9), cell
    return kept


def test_each_location_counts_once_at_each_level(app, api):
    map_id = make_map(api)["id"]
    make_location(api, map_id, lat=48.8584, lng=2.2945)
    make_location(api, map_id, lat=48.8606, lng=2.3376)
    cells = assert_in_step(app, map_id)
    assert {level for level, _x, _y in cells} == set(LEVELS)
    at_2 = [values for (level, _x, _y), values in cells.items() if level == 2]
    assert at_2 == [(2, 48.8584 + 48.8606, 2.2945 + 2.3376, 48.8584, 48.8606, 2.2945, 2.3376)]
    x, y = cell_of(48.8584, 2.2945, 16)
    assert cells[(16, x, y)][0] == 1


def test_updates_moves_and_deletes_keep_counts_and_boxes(app, api):
    map_id = make_map(api)["id"]
    spots = [
        make_location(api, map_id, lat=10 + i * 0.001, lng=20 + i * 0.002)["id"] for i in range(6)
    ]
    # The box's edges go: the boxes shrink back to what is left.
    api.delete(f"/maps/{map_id}/locations/{spots[0]}")
    api.delete(f"/maps/{map_id}/locations/{spots[5]}")
    cells = assert_in_step(app, map_id)
    (coarse,) = [values for (level, _x, _y), values in cells.items() if level == 2]
    assert coarse[0] == 4 and coarse[3] == pytest.approx(10.001) and coarse[4] == pytest.approx(10.004)
    # Moved far away, renamed only, moved back.
    api.put(f"/maps/{map_id}/locations/{spots[1]}", json={"lat": -33.86, "lng": 151.21})
    api.put(f"/maps/{map_id}/locations/{spots[2]}", json={"name": "renamed"})
    api.put(f"/maps/{map_id}/locations/{spots[3]}", json={"lng": 20.5})
    assert_in_step(app, map_id)
    bulk = [{"name": f"b{i}", "lat": -60 + i, "lng": 179.9 - i} for i in range(50)]
    assert api.post(f"/maps/{map_id}/locations/bulk", json={"locations": bulk}).status_code == 201
    assert_in_step(app, map_id)
    ids = [spots[1], spots[2]]
    assert api.post(f"/maps/{map_id}/locations/bulk-delete", json={"ids": ids}).status_code == 200
    assert_in_step(app, map_id)


def test_the_poles_and_the_antimeridian_have_their_cells(app, api):
    map_id = make_map(api)["id"]
    for lat, lng in ((90, 180), (-90, -180), (85.05112878, 0), (-85.06, 179.99999)):
        make_location(api, map_id, lat=lat, lng=lng)
    cells = assert_in_step(app, map_id)
    side = 1 << 18
    assert cells[(16, side - 1, 0)][0] == 1  # lng 180 in the last column, lat clamped
    assert cells[(16, 0, side - 1)][0] == 1
    assert cells[(16, side // 2, 0)][0] == 1


def test_the_smallest_latitudes_are_the_equators_row(app, api):
    """5e-324 is a valid latitude: it must not make the cells' arithmetic fail."""
    map_id = make_map(api)["id"]
    for lat, lng in ((5e-324, 5e-324), (-5e-324, 1e-310), (1e-300, -1e-320)):
        make_location(api, map_id, lat=lat, lng=lng)
    cells = assert_in_step(app, map_id)
    side = 1 << 18
    assert sum(values[0] for (level, _x, y), values in cells.items() if level == 16 and y == side // 2) == 3
    answer = api.get(f"/maps/{map_id}/locations/clusters?bbox=-1,-1,1,1&zoom=3")
    assert answer.status_code == 200 and answer.json["data"]["total"] == 3


def test_a_deleted_map_takes_its_cells_and_a_layer_change_moves_nothing(app, api):
    map_id, other = make_map(api)["id"], make_map(api)["id"]
    layer = make_layer(api, map_id)["id"]
    spot = make_location(api, map_id, layerIds=[layer])["id"]
    make_location(api, other)
    api.put(f"/maps/{map_id}/locations/{spot}/layers", json={"layerIds": []})
    assert_in_step(app, map_id)
    assert api.delete(f"/maps/{map_id}").status_code == 200
    assert cells_of(app, map_id) == {}
    assert sum(values[0] for (level, *_), values in cells_of(app, other).items() if level == 2) == 1


def test_counts_stay_exact_under_concurrent_writers(app, api, live_server):
    """Writer threads create, move and delete locations of one map through
    a real server at once; the cells then hold exactly what is there."""
    map_id = make_map(api)["id"]
    base = live_server + "/api/v1"
    headers = {"Authorization": f"Bearer {api.key}"}
    errors = []

    def writer(seed: int) -> None:
        with requests.Session() as session:
            session.headers.update(headers)
            for round_ in range(6):
                items = [
                    {"name": f"w{seed}-{round_}-{i}", "lat": 40 + (seed * 7 + i) % 9 * 0.01,
                     "lng": -3 + (round_ * 5 + i) % 11 * 0.01}
                    for i in range(5)
                ]
                response = session.post(f"{base}/maps/{map_id}/locations/bulk", json={"locations": items})
                if response.status_code != 201:
                    errors.append(response.text)
                    return
                created = response.json()["data"]["created"]
                moved = session.put(
                    f"{base}/maps/{map_id}/locations/{created[0]['id']}", json={"lat": 41.5}
                )
                gone = session.delete(f"{base}/maps/{map_id}/locations/{created[1]['id']}")
                if moved.status_code != 200 or gone.status_code != 200:
                    errors.append(moved.text + gone.text)

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    cells = assert_in_step(app, map_id)
    total = sum(values[0] for (level, *_), values in cells.items() if level == 2)
    assert total == 6 * 6 * 4
    assert math.isfinite(total)
