"""``mapapi sync``'s parts in-process: reading odd files, checking rows by the
contract's rules, and packing the writes within the service's limits."""

import json

import orjson
import pytest

from mapapi import config
from mapapi.contract.schemas import SYNC_MAX
from mapapi.filesync import plan as planning
from mapapi.filesync.current import MapState, read_state
from mapapi.filesync.rows import BadRow, Row, csv_rows, geojson_rows
from mapapi.filesync.source import FileError, csv_file, geojson_features, is_geojson


def rows_of(text: str, id_column=None):
    data = text.encode()
    file = csv_file(data, (id_column,) if id_column else ("externalId", "id"))
    read = csv_rows(file, id_column)
    return [read.check(row) if isinstance(row, Row) else row for row in read.rows]


def test_the_body_limit_and_the_batch_size_are_the_services():
    assert planning.MAX_BODY_BYTES == config.MAX_BODY_BYTES
    assert SYNC_MAX == 1000


def test_writes_are_packed_by_1000_and_within_2_mib():
    plan = planning.Plan()
    for number in range(2500):
        item = orjson.dumps({"externalId": f"E{number}", "name": "n", "lat": 1.0, "lng": 2.0})
        plan.upserts.append(planning.Write(number, f"E{number}", item, "'n'", True))
    assert [len(batch.items) for batch in planning.upsert_batches(plan)] == [1000, 1000, 500]
    long = "x" * 9000  # a long description: 1000 of them pass 2 MiB
    plan.upserts = [
        planning.Write(
            n, f"E{n}", orjson.dumps({"externalId": f"E{n}", "description": long}), "", False
        )
        for n in range(1000)
    ]
    batches = list(planning.upsert_batches(plan))
    assert len(batches) == 5 and all(len(b.body) <= config.MAX_BODY_BYTES for b in batches)
    sent = [item["externalId"] for b in batches for item in json.loads(b.body)["locations"]]
    assert sent == [f"E{n}" for n in range(1000)]
    assert [n for b in batches for n in b.items] == list(range(1000))


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_the_delimiter_is_found_whatever_the_quoted_cells_hold(delimiter):
    header = delimiter.join(["id", "name", "lat", "lng", "notes"])
    body = delimiter.join(["A", '"Bar, Café; and | more"', "1.5", "2.5", '"two\nlines ""quoted"""'])
    (row,) = rows_of(f"\ufeff{header}\r\n{body}\r\n")
    assert row.external_id == "A" and row.fields["name"] == "Bar, Café; and | more"
    assert row.fields["properties"] == {"notes": 'two\nlines "quoted"'}
    assert (row.fields["lat"], row.fields["lng"]) == (1.5, 2.5)


def test_cells_are_read_as_the_service_reads_fields():
    rows = rows_of(
        "externalId,Name,LATITUDE,lon,tagIds,categoryId,extra,\n"
        " A ,  Spaced  ,1,2, t1 ; ;t2;t1 ,, kept as written ,\n"
        "B,b,1e1,-2.5,,c1,,\n"
    )
    first, second = rows
    assert first.external_id == "A" and first.fields["name"] == "Spaced"
    assert first.fields["tagIds"] == ["t1", "t2"]  # repeats collapse, order kept
    assert first.fields["categoryId"] is None
    assert first.fields["properties"] == {"extra": " kept as written "}
    assert second.fields["lat"] == 10.0 and second.fields["properties"] == {}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("A,n,91,2", ["lat: must be between -90 and 90"]),
        ("A,n,1,-181", ["lng: must be between -180 and 180"]),
        ("A,n,1;5,2", ["lat: must be a decimal number such as 48.8566, not '1;5'"]),
        ("A,n,nan,2", ["lat: must be a decimal number such as 48.8566, not 'nan'"]),
        ("A,,1,2", ["name: required"]),
        (",n,1,2", ["externalId: required (the row's externalId)"]),
        ("A," + "n" * 201 + ",1,2", ["name: length must be between 1 and 200"]),
        ("A,n,1,2,surplus", ["has 5 cells, the header 4 columns"]),
    ],
)
def test_a_bad_row_is_named_by_its_fault(line, expected):
    (bad,) = rows_of(f"externalId,name,lat,lng\n{line}\n")
    assert bad == BadRow(2, expected)


def test_a_header_without_the_id_column_or_with_a_field_twice_is_a_file_error():
    with pytest.raises(FileError, match="'code'"):
        rows_of("id,name\nA,b\n", id_column="code")
    with pytest.raises(FileError, match="no column 'externalId' or 'id'"):
        rows_of("name,lat\nb,1\n")
    with pytest.raises(FileError, match="both give the lat"):
        rows_of("id,lat,latitude\nA,1,2\n")
    with pytest.raises(FileError, match="not UTF-8"):
        csv_file(b"id,name\nA,\xff\n", ("id",))


def test_geojson_features_are_read_as_the_import_reads_them():
    collection = {
        "type": "FeatureCollection",
        "features": [
            {"type": "Feature", "id": 7, "geometry": {"type": "Point", "coordinates": [2, 1]},
             "properties": {"name": "By id", "site": "x"}},
            {"type": "Feature", "geometry": {"type": "Point", "coordinates": [200, 100]},
             "properties": {"externalId": "B"}},
            {"type": "Feature", "geometry": {"type": "Point", "coordinates": [2, 1]},
             "properties": {"name": "No id"}},
        ],
    }  # fmt: skip
    data = json.dumps(collection).encode()
    assert is_geojson(b"\xef\xbb\xbf  " + data) and not is_geojson(b"id,name\n")
    read = geojson_rows(geojson_features(data), None)
    first, second, third = list(read.rows)
    assert first == Row(1, "7", {"name": "By id", "lat": 1, "lng": 2, "properties": {"site": "x"}})
    assert second == BadRow(2, [
        "geometry: longitude (coordinates[0]): must be between -180 and 180",
        "geometry: latitude (coordinates[1]): must be between -90 and 90",
    ])  # fmt: skip
    assert third == BadRow(3, ["properties.externalId or id: required (the Feature's externalId)"])
    with pytest.raises(FileError, match="FeatureCollection"):
        geojson_features(b'{"type": "Feature"}')


def test_the_export_is_read_as_it_streams():
    export = {
        "type": "FeatureCollection",
        "features": [
            {"type": "Feature", "id": "L1", "geometry": {"type": "Point", "coordinates": [2.5, 1.5]},
             "properties": {"name": "a", "description": "", "address": "", "categoryId": "c",
                            "tagIds": ["t2", "t1"], "layerIds": ["y", "x"], "properties": {"k": 1},
                            "externalId": "E1", "createdAt": "-", "updatedAt": "-"}},
            {"type": "Feature", "id": "L2", "geometry": {"type": "Point", "coordinates": [0, 0]},
             "properties": {"name": "b", "description": "", "address": "", "categoryId": None,
                            "tagIds": [], "layerIds": [], "properties": {},
                            "externalId": None, "createdAt": "-", "updatedAt": "-"}},
        ],
    }  # fmt: skip
    text = json.dumps(export).encode()
    state = read_state(text[i : i + 7] for i in range(0, len(text), 7))
    assert isinstance(state, MapState) and state.without_external_id == 1
    (location,) = state.by_external_id.values()
    assert location.id == "L1"
    same = {"name": "a", "lat": 1.5, "lng": 2.5, "tagIds": ["t2", "t1", "t2"], "layerIds": ["x", "y"],
            "properties": {"k": 1}, "categoryId": "c"}  # fmt: skip
    assert location.differs(same) == []
    assert location.differs({**same, "tagIds": ["t1", "t2"], "address": "x"}) == [
        "tagIds",
        "address",
    ]
    assert state.known_ids["tagIds"] == {"t1", "t2"} and state.known_ids["categoryId"] == {"c"}
