"""The items' query: the standard's parameters, the list's filters (section
9, read by the list's own schema and turned into SQL by its own code), the
queryables as equality parameters and a CQL2 ``filter``, all ANDed into
one ``Selection``; and the keyset ``cursor`` of the pages after the first.

Unlike ``/api/v1``, an unknown parameter is refused, as the standard asks.
"""

import base64
import binascii
import dataclasses
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from marshmallow import ValidationError
from sqlalchemy import and_, true
from werkzeug.datastructures import MultiDict

from ..contract.location_query import BoundingBox, LocationFilterSchema
from ..http.errors import stringify_keys, validation_error
from ..services.location_filters import Selection, selection
from ..storage.models import Location
from ..timeutil import parse_timestamp
from . import cql

DEFAULT_LIMIT, MAX_LIMIT = 100, 10_000
#: The list's filters, taken as they are (contract section 9).
LIST_FILTERS = ("q", "categoryId", "tagId", "layerId", "externalId")
#: The queryables as query parameters: equal, exactly.
_c = Location.__table__.c
EQUALITY = {"name": _c.name, "description": _c.description, "address": _c.address}
OWN = ("f", "limit", "bbox", "datetime", "filter", "filter-lang", "cursor")
ACCEPTED = frozenset((*OWN, *LIST_FILTERS, *EQUALITY))
FORMATS = ("json", "geojson")
OPEN = ("", "..")

_list_filters = LocationFilterSchema()
_box = BoundingBox()


class ItemsQuery(NamedTuple):
    chosen: Selection
    limit: int
    #: The last location of the page before (its pk), from ``cursor``; None on the first.
    after: int | None


def read_items_query(args: MultiDict) -> ItemsQuery:
    """The query of ``args``; VALIDATION_ERROR naming every parameter at fault."""
    errors = {name: ["Unknown parameter."] for name in args if name not in ACCEPTED}
    if any(value not in FORMATS for value in args.getlist("f")):
        errors["f"] = ["Must be json or geojson."]
    readers = {
        "limit": _limit,
        "bbox": _bbox,
        "datetime": _datetime,
        "cursor": _cursor,
    }
    read = {}
    for name, reader in readers.items():
        if name in args:
            try:
                read[name] = reader(args[name])
            except ValueError as error:
                errors[name] = [str(error)]
    where = [column == args[name] for name, column in EQUALITY.items() if name in args]
    language = args.get("filter-lang", "cql2-text")
    if language not in cql.LANGUAGES:
        errors["filter-lang"] = ["Must be cql2-text or cql2-json."]
    elif "filter" in args:
        try:
            where.append(cql.condition(cql.parse(args["filter"], language)))
        except cql.FilterError as error:
            errors["filter"] = [str(error)]
    try:
        loaded = _list_filters.load(
            MultiDict(
                [
                    (key, value)
                    for key, value in args.items(multi=True)
                    if key in LIST_FILTERS
                ]
            )
        )
    except ValidationError as error:
        errors.update(stringify_keys(error.normalized_messages()))
        loaded = {}
    if errors:
        raise validation_error("The query is invalid.", errors)
    if "bbox" in read:
        loaded["bbox"] = read["bbox"]  # the list's own box condition
    if "datetime" in read:
        where.append(read["datetime"])
    chosen = selection(loaded)
    chosen = dataclasses.replace(chosen, where=(*chosen.where, *where))
    return ItemsQuery(chosen, read.get("limit", DEFAULT_LIMIT), read.get("cursor"))


def _limit(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"Must be a whole number from 1 (at most {MAX_LIMIT} are returned)."
        )
    return min(int(text), MAX_LIMIT)


def _bbox(text: str) -> tuple[float, float, float, float]:
    """``minLng,minLat,maxLng,maxLat`` (6 numbers: the first two of each
    corner), in any notation ``float`` reads, checked by the list's own rule."""
    try:
        numbers = [Decimal(part.strip()) for part in text.split(",")]
    except InvalidOperation:
        numbers = []
    if len(numbers) not in (4, 6) or not all(number.is_finite() for number in numbers):
        raise ValueError("Must be minLng,minLat,maxLng,maxLat: four numbers (or six).")
    if len(numbers) == 6:
        numbers = [numbers[0], numbers[1], numbers[3], numbers[4]]
    if any(number.adjusted() > 3 for number in numbers):  # written out, 1e999999 is long
        raise ValueError(_box.error_messages["range"])
    # Below a degree's 1e-40th, a number is 0 (and 1e-999999 is long too).
    numbers = [number if number.adjusted() > -40 else Decimal(0) for number in numbers]
    try:
        return _box.deserialize(",".join(format(number, "f") for number in numbers))
    except ValidationError as error:
        raise ValueError(" ".join(error.messages)) from None


def _datetime(text: str):
    """``updatedAt`` at an instant, or within an interval ``a/b`` (open ends: ``..`` or empty)."""
    updated_at = _c.updated_at
    try:
        if "/" not in text:
            return updated_at == parse_timestamp(text)
        start, end = text.split("/")
        bounds = []
        if start not in OPEN:
            bounds.append(updated_at >= parse_timestamp(start))
        if end not in OPEN:
            bounds.append(updated_at <= parse_timestamp(end))
    except ValueError:
        raise ValueError(
            "Must be an ISO 8601 date-time, or an interval start/end (`..` or empty: open)."
        ) from None
    return and_(*bounds) if bounds else true()


def write_cursor(pk: int) -> str:
    """The ``cursor`` of the page after the location ``pk``: opaque to clients."""
    return base64.urlsafe_b64encode(f"after:{pk}".encode()).decode().rstrip("=")


def _cursor(text: str) -> int:
    try:
        decoded = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    except (binascii.Error, UnicodeError, ValueError):
        decoded = ""
    prefix, _, pk = decoded.partition(":")
    if prefix != "after" or not pk.isascii() or not pk.isdigit() or len(pk) > 18:
        raise ValueError(
            "Not a cursor of this service: follow the next link as it is written."
        )
    return int(pk)
