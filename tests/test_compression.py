"""gzip (MAPAPI_GZIP_MIN_BYTES): large answers compressed for clients that ask,
streamed ones as they stream; clients that do not ask get the same bytes as before."""

import gzip
import zlib

import pytest
import requests
from flask import Response, stream_with_context

from mapapi import create_app

from .factories import ApiClient


def fill_map(api, count=60) -> str:
    map_id = api.post("/maps", json={"title": "Big"}).get_json()["data"]["id"]
    locations = [
        {"name": f"Place {i}", "lat": 48.85 + i / 1000, "lng": 2.35, "description": "A café " * 5}
        for i in range(count)
    ]
    assert api.post(f"/maps/{map_id}/locations/bulk", json={"locations": locations}).status_code == 201
    return map_id


def test_a_large_answer_is_gzipped_for_a_client_that_accepts_it(api):
    map_id = fill_map(api)
    plain = api.get(f"/maps/{map_id}/locations?pageSize=100")
    packed = api.get(f"/maps/{map_id}/locations?pageSize=100", headers={"Accept-Encoding": "gzip"})
    assert packed.status_code == 200
    assert packed.headers["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in packed.headers["Vary"]
    assert int(packed.headers["Content-Length"]) == len(packed.data) < len(plain.data) / 4
    assert gzip.decompress(packed.data) == plain.data


@pytest.mark.parametrize("accept", [None, "identity", "gzip;q=0", "br", "deflate"])
def test_a_client_that_does_not_ask_for_gzip_gets_identity_bytes(api, accept):
    map_id = fill_map(api)
    headers = {} if accept is None else {"Accept-Encoding": accept}
    response = api.get(f"/maps/{map_id}/locations?pageSize=100", headers=headers)
    assert "Content-Encoding" not in response.headers
    assert response.get_json()["data"]["pagination"]["total"] == 60
    assert response.data.startswith(b'{"data":')
    assert "Accept-Encoding" in response.headers["Vary"]  # caches must know it could differ


@pytest.mark.parametrize("accept", ["gzip", "gzip, deflate, br", "*", "br;q=1.0, gzip;q=0.5"])
def test_every_way_of_accepting_gzip_is_understood(api, accept):
    map_id = fill_map(api)
    response = api.get(f"/maps/{map_id}/locations?pageSize=100", headers={"Accept-Encoding": accept})
    assert response.headers["Content-Encoding"] == "gzip"


def test_a_small_answer_is_never_compressed(api):
    response = api.get("/maps", headers={"Accept-Encoding": "gzip"})
    assert len(response.data) < 1024
    assert "Content-Encoding" not in response.headers
    assert "Accept-Encoding" not in response.headers.get("Vary", "")


def test_the_threshold_is_the_setting_and_zero_turns_it_off(app_config, account):
    from .factories import create_key

    for minimum, compressed in [("0", False), ("50", True), ("100000", False)]:
        app_config["GZIP_MIN_BYTES"] = minimum
        app = create_app(app_config)
        api = ApiClient(app.test_client(), create_key(app, "owner@example.com"))
        map_id = fill_map(api, count=3)
        response = api.get(f"/maps/{map_id}", headers={"Accept-Encoding": "gzip"})
        assert ("Content-Encoding" in response.headers) is compressed, minimum


def test_a_streamed_answer_is_compressed_as_it_streams(app, client):
    produced = []

    def chunks():
        for number in range(200):
            produced.append(number)
            yield (f'{{"n": {number}, "text": "' + "x" * 500 + '"}\n').encode()

    app.add_url_rule(
        "/stream-probe", "stream_probe",
        lambda: Response(stream_with_context(chunks()), mimetype="application/x-ndjson"),
    )  # fmt: skip
    response = client.get("/stream-probe", headers={"Accept-Encoding": "gzip"}, buffered=False)
    assert response.headers["Content-Encoding"] == "gzip"
    assert "Content-Length" not in response.headers
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    body, pieces = b"", response.iter_encoded()
    first = next(pieces)
    assert len(produced) < 200  # the first compressed bytes left before the last chunk was made
    body = decompressor.decompress(first) + b"".join(decompressor.decompress(p) for p in pieces)
    body += decompressor.flush()
    response.close()
    assert body.count(b"\n") == 200 and body.startswith(b'{"n": 0,')


def test_the_docs_page_assets_are_compressed_over_http(live_server):
    plain = requests.get(f"{live_server}/api/v1/openapi.json", headers={"Accept-Encoding": "identity"}, timeout=10)
    packed = requests.get(f"{live_server}/api/v1/openapi.json", headers={"Accept-Encoding": "gzip"}, timeout=10)
    assert "Content-Encoding" not in plain.headers
    assert packed.headers["Content-Encoding"] == "gzip"
    assert packed.content == plain.content  # requests decodes it
    assert int(packed.headers["Content-Length"]) < len(plain.content) / 5


def test_a_file_sent_as_is_is_compressed_as_it_streams_over_http(live_server):
    asset = f"{live_server}/docs/assets/swagger-ui-bundle.js"
    plain = requests.get(asset, headers={"Accept-Encoding": "identity"}, timeout=10)
    packed = requests.get(asset, headers={"Accept-Encoding": "gzip"}, timeout=10, stream=True)
    assert plain.status_code == 200 and "Content-Encoding" not in plain.headers
    assert int(plain.headers["Content-Length"]) == len(plain.content) > 100_000
    assert packed.status_code == 200 and packed.headers["Content-Encoding"] == "gzip"
    wire = packed.raw.read(decode_content=False)
    assert len(wire) < len(plain.content) / 2
    assert gzip.decompress(wire) == plain.content
    small = requests.get(f"{live_server}/healthz", headers={"Accept-Encoding": "gzip"}, timeout=5)
    assert "Content-Encoding" not in small.headers
