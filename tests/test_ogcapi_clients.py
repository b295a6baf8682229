"""/ogcapi read by the GIS clients people use, against a real server: GDAL's
OAPIF driver (ogrinfo, ogr2ogr), OWSLib and QGIS, on one map of 10,000
locations made once for the module."""

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
import requests

from .helpers import served_mapapi

SIZE = 10_000
QGIS_PYTHON = "/usr/bin/python3"

needs_gdal = pytest.mark.skipif(
    shutil.which("ogr2ogr") is None, reason="GDAL (Debian's gdal-bin) is not installed"
)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """``(base URL, key, map id, {location id: (name, lng, lat)})``."""
    workdir = tmp_path_factory.mktemp("ogcapi_clients")
    with served_mapapi(
        workdir,
        MAPAPI_RATELIMIT_GENERAL="100000 per hour",
        MAPAPI_RATELIMIT_SYNC="1000 per hour",
    ) as (server, key):
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {key}"
        api = server.base + "/api/v1"
        map_id = session.post(api + "/maps", json={"title": "Ten thousand"}).json()["data"]["id"]
        other = session.post(api + "/maps", json={"title": "Empty"}).json()["data"]["id"]
        shuffled = random.Random(39)
        expected = {}
        for start in range(0, SIZE, 1000):
            batch = [
                {
                    "name": f"p{n}",
                    "lat": round(shuffled.uniform(-80, 80), 6),
                    "lng": round(shuffled.uniform(-179, 179), 6),
                    "externalId": f"e{n}",
                }
                for n in range(start, start + 1000)
            ]
            answer = session.post(f"{api}/maps/{map_id}/locations/upsert", json={"locations": batch})
            assert answer.status_code == 200, answer.text
            for location in answer.json()["data"]["locations"]:
                expected[location["id"]] = (location["name"], location["lng"], location["lat"])
        yield server.base, key, map_id, other, expected


def gdal(*args, workdir: Path, **env):
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "CPL_DEBUG": "ON", **env}
    result = subprocess.run(args, capture_output=True, text=True, env=environment, cwd=workdir, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def copied(path: Path) -> dict:
    features = json.loads(path.read_text())["features"]
    return {
        f["properties"]["id"]: (f["properties"]["name"], *f["geometry"]["coordinates"]) for f in features
    }


def fetched(result) -> list[str]:
    """The items URLs GDAL asked for, from its debug output."""
    return [line for line in result.stderr.splitlines() if "Fetch(" in line and "/items" in line]


@needs_gdal
def test_ogrinfo_lists_the_maps_as_layers_with_their_counts(service, tmp_path):
    base, key, map_id, other, _expected = service
    url = f"OAPIF:{base}/ogcapi"
    listed = gdal("ogrinfo", "-ro", url, workdir=tmp_path, GDAL_HTTP_HEADERS=f"Authorization: Bearer {key}")
    assert f"1: {map_id} (title: Ten thousand) (Point)" in listed.stdout
    assert f"2: {other} (title: Empty)" in listed.stdout  # no Feature to tell its type
    summary = gdal("ogrinfo", "-ro", "-so", "-oo", "PAGE_SIZE=1000", url, map_id,
                   workdir=tmp_path, GDAL_HTTP_USERPWD=f"{key}:")
    assert f"Feature Count: {SIZE}" in summary.stdout


@needs_gdal
@pytest.mark.parametrize("credentials", ["header", "basic"])
def test_ogr2ogr_copies_the_map_exactly(service, tmp_path, credentials):
    base, key, map_id, _other, expected = service
    env = (
        {"GDAL_HTTP_HEADERS": f"Authorization: Bearer {key}"}
        if credentials == "header"
        else {"GDAL_HTTP_AUTH": "BASIC", "GDAL_HTTP_USERPWD": f"anyone:{key}"}
    )
    out = tmp_path / "copy.geojson"
    result = gdal("ogr2ogr", "-f", "GeoJSON", str(out), "-oo", "PAGE_SIZE=1000",
                  f"OAPIF:{base}/ogcapi", map_id, workdir=tmp_path, **env)
    assert copied(out) == expected
    assert len(fetched(result)) <= 12  # pages of 1,000 (and the one GDAL reads first)


@needs_gdal
def test_ogr2ogr_spatial_and_attribute_filters_are_done_by_the_service(service, tmp_path):
    base, key, map_id, _other, expected = service
    out = tmp_path / "box.geojson"
    result = gdal("ogr2ogr", "-f", "GeoJSON", str(out), "-oo", "PAGE_SIZE=1000", "-spat", "0", "0", "20", "20",
                  f"OAPIF:{base}/ogcapi", map_id, workdir=tmp_path, GDAL_HTTP_USERPWD=f"{key}:")
    inside = {i: v for i, v in expected.items() if 0 <= v[1] <= 20 and 0 <= v[2] <= 20}
    assert copied(out) == inside and 0 < len(inside) < 1000
    assert any("bbox=0,0,20,20" in url for url in fetched(result))
    assert not any("cursor=" in url for url in fetched(result))  # not the whole map, page by page
    out = tmp_path / "name.geojson"
    result = gdal("ogr2ogr", "-f", "GeoJSON", str(out), "-oo", "PAGE_SIZE=1000", "-where", "name = 'p77'",
                  f"OAPIF:{base}/ogcapi", map_id, workdir=tmp_path, GDAL_HTTP_USERPWD=f"{key}:")
    assert [v[0] for v in copied(out).values()] == ["p77"]
    assert any("name=p77" in url for url in fetched(result))


def test_owslib_reads_collections_and_items(service):
    from owslib.ogcapi.features import Features

    base, key, map_id, other, expected = service
    features = Features(base + "/ogcapi", headers={"Authorization": f"Bearer {key}"})
    assert [c["id"] for c in features.collections()["collections"]] == [map_id, other]
    assert features.collection(map_id)["title"] == "Ten thousand"
    page = features.collection_items(map_id, limit=50, bbox=[0, 0, 20, 20])
    inside = {i for i, v in expected.items() if 0 <= v[1] <= 20 and 0 <= v[2] <= 20}
    assert page["numberMatched"] == len(inside)
    assert {f["id"] for f in page["features"]} <= inside and page["numberReturned"] == min(50, len(inside))
    assert "name" in features.collection_queryables(map_id)["properties"]


@pytest.mark.skipif(
    subprocess.run([QGIS_PYTHON, "-c", "import qgis.core"], capture_output=True).returncode != 0,
    reason="QGIS (Debian's python3-qgis) is not installed",
)
def test_qgis_opens_a_map_as_an_oapif_layer_with_basic_authentication(service):
    base, key, map_id, _other, expected = service
    reader = Path(__file__).with_name("qgis_reader.py")
    result = subprocess.run([QGIS_PYTHON, str(reader), base, map_id, key], capture_output=True,
                            text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "QT_QPA_PLATFORM": "offscreen"})
    assert result.returncode == 0, result.stderr[-3000:]
    read = json.loads(result.stdout.strip().splitlines()[-1])
    assert read["valid"] and read["count"] == SIZE
    assert {i: tuple(v) for i, v in read["features"].items()} == expected


@needs_gdal
def test_the_docs_gdal_lines_work_as_pasted(service, tmp_path):
    base, key, map_id, _other, _expected = service
    doc = (Path(__file__).resolve().parent.parent / "docs" / "ogcapi.md").read_text()
    blocks = doc.split("```sh\n")[1:]
    assert len(blocks) == 2
    commands = blocks[1].split("```", 1)[0]
    assert commands.count("PAGE_SIZE=1000") == 4
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", commands],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MAPAPI_URL": base, "MAPAPI_KEY": key, "MAP_ID": map_id},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Feature Count: {SIZE}" in result.stdout
    assert (tmp_path / "map.gpkg").exists() and (tmp_path / "box.geojson").exists()
