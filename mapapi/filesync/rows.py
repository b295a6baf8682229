"""Each row of the file read, and checked by the contract's own rules.

A row becomes what an upsert item takes: its ``externalId`` and the fields
the file gives. It is checked by the service's own input schema for a
location (``LocationInputSchema``, as a partial update reads it: only the
fields given), so a row the command accepts is one the service accepts,
and the rules cannot drift apart. A CSV row is first read cheaply (cells
trimmed, numbers and id lists parsed), so that a row equal to its location
on the map needs no other check: it holds values the service already
keeps. Every other row is checked before anything is written. Rules that
need the map (a new row must have a name and coordinates; ids of
categories, tags and layers) are the plan's.

A CSV file speaks for the fields it has columns for: a location's other
fields are left as they are. Its cells are read as text: ``lat`` and ``lng``
as decimal numbers (with a decimal comma too, ``48,8566``, in a file whose
cells are separated by ``;`` or tabs, as spreadsheets export it),
``tagIds`` and ``layerIds`` as ids separated by ``;``, an empty
``categoryId`` as none; every other column is the location's
``properties``, each non-empty cell a string under the column's name.
A GeoJSON Feature is read, and checked, as the import reads it.
"""

import re
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from marshmallow import ValidationError

from ..contract.geojson import read_feature
from ..contract.loading import compile_loader
from ..contract.schemas import LocationInputSchema
from .source import CsvFile, FileError

#: CSV columns read as a location's fields (compared without case), by field.
FIELD_COLUMNS = {
    "name": "name",
    "lat": "lat",
    "latitude": "lat",
    "lng": "lng",
    "longitude": "lng",
    "lon": "lng",
    "description": "description",
    "address": "address",
    "categoryid": "categoryId",
    "tagids": "tagIds",
    "layerids": "layerIds",
}
#: The id column when ``--id-column`` is not given: the first the header has.
DEFAULT_ID_COLUMNS = ("externalId", "id")
#: Fields a row may not leave empty when the file has their column.
REQUIRED = ("name", "lat", "lng")
ID_SEPARATOR = ";"
#: A number of each coordinate, for the message that asks for one (Paris).
EXAMPLES = {"lat": "48.8566", "lng": "2.3522"}
_DECIMAL = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")
_DECIMAL_COMMA = re.compile(r"\s*[+-]?\d*,\d+\s*")
_RANGE = re.compile(
    r"[Mm]ust be greater than or equal to (\S+) and less than or equal to (\S+?)\.?$"
)

_schema = LocationInputSchema(partial=True)
_load = compile_loader(_schema)
#: The schema's names (``category_id``) -> the API's (``categoryId``).
_API_NAMES = {name: field.data_key or name for name, field in _schema.load_fields.items()}


class Row(NamedTuple):
    """A good row: where it is (a line, or a Feature's number from 1), its
    ``externalId``, and the fields it gives by their API names."""

    number: int
    external_id: str
    fields: dict


class BadRow(NamedTuple):
    """A row the contract refuses: where it is, and one message per field."""

    number: int
    messages: list[str]


class Rows(NamedTuple):
    """The file's rows, read one by one (``rows``), and ``check``: the
    contract's rules for a row about to be written. ``place`` names where a
    row is (``line``, or ``feature``)."""

    place: str
    rows: Iterator[Row | BadRow]
    check: Callable[[Row], Row | BadRow]

    def where(self, number: int) -> str:
        return f"{self.place} {number}"


# --- CSV -----------------------------------------------------------------------------


class Columns(NamedTuple):
    """What each column of a CSV header is: a field, the id, or a property."""

    by_index: list[tuple[str, str]]  # (kind: field/id/property/unnamed, field or property name)
    shown: dict[str, str]  # field -> the column's name in the header, for messages
    decimal_comma: bool = False  # numbers may be written 48,8566

    @classmethod
    def of(cls, header: list[str], id_column: str | None, decimal_comma: bool = False) -> "Columns":
        lowered = [name.lower() for name in header]
        wanted = [id_column] if id_column else list(DEFAULT_ID_COLUMNS)
        id_index = next(
            (lowered.index(name.lower()) for name in wanted if name.lower() in lowered), None
        )
        if id_index is None:
            raise FileError(
                f"the header has no column {' or '.join(repr(name) for name in wanted)} "
                "to read the externalId from (choose one with --id-column)"
            )
        by_index, shown, properties = [], {"externalId": header[id_index]}, set()
        for index, (name, low) in enumerate(zip(header, lowered, strict=True)):
            field = FIELD_COLUMNS.get(low)
            if index == id_index:
                by_index.append(("id", "externalId"))
            elif field is not None:
                if field in shown:
                    raise FileError(
                        f"the columns {shown[field]!r} and {name!r} both give the {field}"
                    )
                shown[field] = name
                by_index.append(("field", field))
            elif not name:
                by_index.append(("unnamed", ""))
            else:
                if name in properties:
                    raise FileError(f"the header has the column {name!r} twice")
                properties.add(name)
                by_index.append(("property", name))
        if properties:
            shown["properties"] = "properties (the other columns)"
        return cls(by_index, shown, decimal_comma)


def csv_rows(file: CsvFile, id_column: str | None) -> Rows:
    columns = Columns.of(file.header, id_column, file.decimal_comma)
    return Rows(
        "line",
        (_csv_row(record, columns) for record in file.records),
        lambda row: _checked(row, columns.shown),
    )


def _csv_row(record, columns: Columns) -> Row | BadRow:
    """The row read cheaply: trimmed, numbers and id lists parsed, unchecked."""
    cells = record.cells
    width = len(columns.by_index)
    if any(cell.strip() for cell in cells[width:]):
        return BadRow(record.line, [f"has {len(cells)} cells, the header {width} columns"])
    fields, messages, external_id = {}, [], ""
    properties = {} if "properties" in columns.shown else None
    padded = [*cells, *[""] * (width - len(cells))][:width]
    for (kind, name), cell in zip(columns.by_index, padded, strict=True):
        if kind == "property":
            if cell.strip():
                properties[name] = cell
        elif kind == "unnamed":
            if cell.strip():
                messages.append(f"a cell in a column with no name in the header: {cell.strip()!r}")
        elif kind == "id":
            external_id = cell.strip()
        else:
            value, problem = _field_value(name, cell, columns.decimal_comma)
            if problem:
                messages.append(f"{columns.shown[name]}: {problem}")
            else:
                fields[name] = value
    if properties is not None:
        fields["properties"] = properties
    if not external_id:
        messages.append(f"{columns.shown['externalId']}: required (the row's externalId)")
    if messages:
        return BadRow(record.line, messages)
    return Row(record.line, external_id, fields)


def _field_value(field: str, cell: str, decimal_comma: bool = False):
    """``(value, None)`` for the API, or ``(None, what is wrong)``."""
    if field in REQUIRED and not cell.strip():
        return None, "required"
    if field in ("lat", "lng"):
        if decimal_comma and _DECIMAL_COMMA.fullmatch(cell):
            cell = cell.replace(",", ".")
        if not _DECIMAL.fullmatch(cell):
            example = EXAMPLES[field]
            return None, f"must be a decimal number such as {example}, not {cell.strip()!r}"
        return float(cell), None
    if field == "categoryId":
        return cell.strip() or None, None
    if field in ("tagIds", "layerIds"):
        return [part.strip() for part in cell.split(ID_SEPARATOR) if part.strip()], None
    return cell.strip(), None


# --- GeoJSON ---------------------------------------------------------------------------


def geojson_rows(features: Iterable, id_property: str | None) -> Rows:
    """Features read and checked as the import reads them (``check`` has nothing left to do)."""
    return Rows(
        "feature",
        (_feature_row(number, f, id_property) for number, f in enumerate(features, start=1)),
        lambda row: row,
    )


def _feature_row(number: int, feature, id_property: str | None) -> Row | BadRow:
    loaded, errors = read_feature(feature, "name", partial=True)
    if errors:
        return BadRow(number, list(_flattened(errors)))
    fields = {_API_NAMES[name]: value for name, value in loaded.items()}
    _plain_properties(fields)
    if id_property and id_property != "externalId":
        external_id = fields.get("properties", {}).pop(id_property, None)
        if not fields.get("properties") and "properties" not in (feature.get("properties") or {}):
            fields.pop("properties", None)  # the id was its only other property
    else:
        external_id = fields.get("externalId")
        if external_id is None and isinstance(feature.get("id"), (str, int)):
            external_id = feature["id"]
    fields.pop("externalId", None)
    if isinstance(external_id, int) and not isinstance(external_id, bool):
        external_id = str(external_id)
    try:
        external_id = _load({"externalId": external_id})["external_id"]
    except ValidationError as error:
        return BadRow(number, _messages(error, {"externalId": id_property or "externalId"}))
    if external_id is None:
        where = f"properties.{id_property}" if id_property else "properties.externalId or id"
        return BadRow(number, [f"{where}: required (the Feature's externalId)"])
    return Row(number, external_id, fields)


def _flattened(errors: dict, prefix: str = "") -> Iterator[str]:
    """``{"geometry": [...], "properties": {"name": [...]}}`` as ``geometry: ...``,
    ``name: ...``: a Feature's properties are named as the fields they are."""
    for key, value in errors.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flattened(value, "" if key == "properties" and not prefix else f"{name}.")
        else:
            yield from (f"{name}: {friendly(message)}" for message in value)


# --- shared ------------------------------------------------------------------------------


def _checked(row: Row, shown: dict[str, str]) -> Row | BadRow:
    """``row`` loaded by the service's schema, or the schema's messages
    (``shown``: the column of each field, to name it)."""
    try:
        loaded = _load({"externalId": row.external_id, **row.fields})
    except ValidationError as error:
        return BadRow(row.number, _messages(error, shown))
    fields = {_API_NAMES[name]: value for name, value in loaded.items()}
    _plain_properties(fields)
    return Row(row.number, fields.pop("externalId"), fields)


def _plain_properties(fields: dict) -> None:
    """The schema's ``properties`` keeps its JSON text beside it: not needed here."""
    if "properties" in fields:
        fields["properties"] = dict(fields["properties"])


def _messages(error: ValidationError, shown: dict[str, str]) -> list[str]:
    found = error.normalized_messages()
    return [
        f"{shown.get(field, field)}: {friendly(message)}"
        for field, messages in found.items()
        for message in (messages if isinstance(messages, list) else [str(messages)])
    ]


def friendly(message: str) -> str:
    """A schema's message as the tail of ``line 17: lat: ...``."""
    message = _RANGE.sub(r"must be between \1 and \2", message).rstrip(".")
    return message[:1].lower() + message[1:]
