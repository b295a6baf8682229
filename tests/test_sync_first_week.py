"""``mapapi sync`` on what a red team and a newcomer fed it in its first week:
a file nested 100,000 levels deep (under a memory cap), integers beyond 64
bits in the file and on the map, a ``;``-separated export with decimal
commas, thousands of bad rows, and values holding terminal escape codes."""

import json
import subprocess
import sys

import pytest

from .helpers import mapapi_program
from .test_filesync import Service, service, summary, write_csv  # noqa: F401 (a fixture)

SUMMARY = "created {}, updated {}, deleted {}, unchanged {} in "
#: What the command may use at most, whatever the file's depth.
PEAK_MEGABYTES = 300
#: The address space the command is given: a runaway is stopped, not the machine.
ADDRESS_SPACE = 2 * 1024**3

#: Runs ``mapapi sync`` under an address-space cap and prints the peak
#: resident memory of that child alone (kilobytes, as Linux counts it).
MEASURED = """
import resource, subprocess, sys
cap = int(sys.argv[1])
def capped():
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
done = subprocess.run(sys.argv[2:], preexec_fn=capped, capture_output=True, text=True)
sys.stderr.write(done.stderr)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def nested_collection(depth: int) -> bytes:
    """A FeatureCollection whose one Feature has a property of ``depth`` nested
    arrays, opened on line 3."""
    return (
        b'{"type": "FeatureCollection",\n"features": [{"type": "Feature",\n'
        b'"geometry": {"type": "Point", "coordinates": [1, 2]}, '
        b'"properties": {"name": "Deep", "externalId": "D1", "deep": '
        + b"[" * depth + b"]" * depth + b"}}]}\n"
    )


@pytest.mark.parametrize("depth", [20_000, 100_000])
def test_a_file_nested_deeper_than_the_api_takes_is_refused_in_bounded_memory(tmp_path, depth):
    path = tmp_path / "deep.geojson"
    path.write_bytes(nested_collection(depth))
    env = {"PATH": "/usr/bin:/bin", "MAPAPI_KEY": "mk_live_x", "MAPAPI_URL": "http://127.0.0.1:9"}
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, str(ADDRESS_SPACE), mapapi_program(), "sync", str(path), "--map", "m"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    status, peak_kilobytes = map(int, done.stdout.split())
    assert status == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: line 3: nested deeper than 14 levels, which no location can hold "
        "(its properties nest 10 levels at most)"
    ]
    assert peak_kilobytes < PEAK_MEGABYTES * 1024, peak_kilobytes


def geojson(features: list[dict]) -> bytes:
    return json.dumps({"type": "FeatureCollection", "features": features}).encode()


def feature(external_id: str, name: str, properties: dict, lng=1.5, lat=2.5) -> dict:
    return {
        "type": "Feature",
        "geometry": {"type": "Point", "coordinates": [lng, lat]},
        "properties": {"externalId": external_id, "name": name, "properties": properties},
    }


def test_properties_nested_as_deep_as_the_api_takes_are_synced(service, tmp_path):
    map_id = service.new_map()
    deepest = {"a": [[[[[[[[[]]]]]]]]]}  # the object is level 1: 10 levels
    path = tmp_path / "deepest.geojson"
    path.write_bytes(geojson([feature("D1", "Deepest", deepest)]))
    assert summary(service.sync(path, "--map", map_id)).startswith(SUMMARY.format(1, 0, 0, 0))
    assert service.by_external_id(map_id)["D1"]["properties"] == deepest


BIG = 1234567890123456789012345  # 25 digits


def test_integers_of_any_size_in_the_file_and_on_the_map_are_kept_exactly(service, tmp_path):
    map_id = service.new_map()
    # Another client stored one on the map: every sync of the map still works.
    service.post(f"/maps/{map_id}/locations", {
        "name": "Theirs", "lat": 1, "lng": 2, "externalId": "T1", "properties": {"n": -BIG},
    })  # fmt: skip
    path = tmp_path / "big.geojson"
    features = [
        feature("B1", "Big", {"n": BIG, "list": [BIG, 1, 2.5]}),
        feature("T1", "Theirs", {"n": -BIG}, lng=2, lat=1),
    ]
    path.write_bytes(geojson(features))
    assert summary(service.sync(path, "--map", map_id)).startswith(SUMMARY.format(1, 0, 0, 1))
    raw = service.http.get(service.url(f"/maps/{map_id}/locations.geojson"), timeout=30).text
    assert str(BIG) in raw and f"-{BIG}" in raw
    assert service.by_external_id(map_id)["B1"]["properties"] == {"n": BIG, "list": [BIG, 1, 2.5]}
    assert summary(service.sync(path, "--map", map_id)).startswith(SUMMARY.format(0, 0, 0, 2))
    features[0]["properties"]["properties"]["n"] = BIG + 1
    path.write_bytes(geojson(features))
    assert summary(service.sync(path, "--map", map_id)).startswith(SUMMARY.format(0, 1, 0, 1))
    assert service.by_external_id(map_id)["B1"]["properties"]["n"] == BIG + 1


@pytest.mark.parametrize("delimiter", [";", "\t"])
def test_a_spreadsheet_export_with_decimal_commas_is_read_as_its_numbers(service, tmp_path, delimiter):
    map_id = service.new_map()
    rows = [
        ["externalId", "name", "lat", "lng", "note"],
        ["P1", "Paris", "48,8566", "2,3522", "a, b"],
        ["L1", "Lisbon", "38,7223", "-9,1393", "x"],
        ["Q1", "Quito", "-0,1807", "-78,4678", ""],
        ["N1", "Null Island", "0", "0.5", ""],
    ]
    path = write_csv(tmp_path / "export.csv", rows, delimiter=delimiter)
    result = service.sync(path, "--map", map_id)
    assert summary(result).startswith(SUMMARY.format(4, 0, 0, 0)), result.stderr
    on_map = service.by_external_id(map_id)
    assert [(on_map[e]["lat"], on_map[e]["lng"]) for e in ("P1", "L1", "Q1", "N1")] == [
        (48.8566, 2.3522), (38.7223, -9.1393), (-0.1807, -78.4678), (0.0, 0.5),
    ]  # fmt: skip
    assert on_map["P1"]["properties"] == {"note": "a, b"}


def test_a_comma_separated_file_keeps_refusing_a_decimal_comma(service, tmp_path):
    map_id = service.new_map()
    rows = [["externalId", "name", "lat", "lng"], ["P1", "Paris", "48,8566", "2.3"], ["P2", "P", "1", "x"]]
    result = service.sync(write_csv(tmp_path / "plain.csv", rows), "--map", map_id)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "line 2: lat: must be a decimal number such as 48.8566, not '48,8566'"
    # each coordinate's message gives one of its own as the example
    assert lines[1] == "line 3: lng: must be a decimal number such as 2.3522, not 'x'"


def test_at_most_20_bad_rows_are_listed_then_how_many_more_of_each_kind(service, tmp_path):
    map_id = service.new_map()
    rows = [["externalId", "name", "lat", "lng"]]
    rows += [[f"E{n}", "Far", "95", "2"] for n in range(3000)]
    rows += [[f"N{n}", "", "1", "2"] for n in range(30)]
    result = service.sync(write_csv(tmp_path / "bad.csv", rows), "--map", map_id)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[:20] == [f"line {n}: lat: must be between -90 and 90" for n in range(2, 22)]
    assert lines[20] == (
        "and 3,010 lines more: lat: must be between … and … (2,980); name: required (30)"
    )
    assert lines[21:] == [f"error: 3,030 lines of {tmp_path / 'bad.csv'} are invalid; nothing was written"]
    assert service.features(map_id) == []
    one = service.sync(write_csv(tmp_path / "one.csv", rows[:2]), "--map", map_id)
    assert one.stderr.strip().splitlines()[-1] == (
        f"error: 1 line of {tmp_path / 'one.csv'} is invalid; nothing was written"
    )


def test_values_holding_control_characters_are_printed_escaped(service, tmp_path):
    map_id = service.new_map()
    service.post(f"/maps/{map_id}/locations", {
        "name": "Gone\x1b]0;owned\x07", "lat": 1, "lng": 2, "externalId": "old\x1b[2J",
    })  # fmt: skip
    rows = [
        ["externalId", "name", "lat", "lng"],
        ["E\x1b[31mRED", "Name\x1b[8m", "1", "2"],
    ]
    result = service.sync(write_csv(tmp_path / "esc.csv", rows), "--map", map_id, "--prune", "--dry-run")
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "\x1b" not in output and "\x07" not in output
    assert "E\\x1b[31mRED" in output and "Name\\x1b[8m" in output
    assert "old\\x1b[2J" in output and "Gone\\x1b]0;owned\\x07" in output


def test_the_plan_names_the_sync_requests_needed_and_left_and_warns_before_sending(tmp_path):
    from .test_filesync import customers, limited_service

    with limited_service(tmp_path, "2 per hour") as (server, key):
        service = Service(server, key, tmp_path)
        map_id = service.new_map()
        path = write_csv(tmp_path / "crm.csv", customers(2500))  # 3 upserts
        before = service.mark()
        planned = service.sync(path, "--map", map_id, "--dry-run")
        assert summary(planned).startswith(SUMMARY.format(2500, 0, 0, 0))
        assert "requests: 3 to the sync bucket, which has 2 of 2 left (2 per hour)" in planned.stdout
        assert planned.stderr.strip().splitlines() == [
            "warning: the run needs 3 requests and the sync bucket has 2 left: it will wait up to "
            "60 min for it to refill (MAPAPI_RATELIMIT_SYNC=2 per hour sizes it)"
        ]
        sent = service.requests_between(before, service.mark())
        assert [(method, path.rsplit("/", 1)[-1]) for method, path, _ in sent] == [
            ("GET", map_id), ("GET", "locations.geojson"), ("GET", "rate-limits"),
        ]  # fmt: skip


def test_a_429_while_writing_names_the_bucket_and_the_setting(tmp_path):
    from .test_filesync import customers, limited_service

    with limited_service(tmp_path, "1 per 2 seconds") as (server, key):
        service = Service(server, key, tmp_path)
        map_id = service.new_map()
        result = service.sync(write_csv(tmp_path / "crm.csv", customers(1100)), "--map", map_id)
        assert summary(result).startswith(SUMMARY.format(1100, 0, 0, 0))
        assert (
            ": the sync bucket (1 per 2 seconds) is empty; MAPAPI_RATELIMIT_SYNC sets it"
            in result.stdout
        ), result.stdout
