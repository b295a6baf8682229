"""The query of a location list and of the GeoJSON export: filters and sort.

Each value that breaks its rule is a field error under the parameter's own
name. Ids are not checked here: one that names nothing matches nothing.
"""

import re

from marshmallow import EXCLUDE, Schema, ValidationError, fields, pre_load, validate

from .fields import Choice, QueryTexts, Text, Timestamp
from .pagination import PageQuerySchema
from .schemas import BULK_MAX, EXTERNAL_ID_MAX

SORTS = ("createdAt", "-createdAt", "updatedAt", "-updatedAt", "name", "-name")
TAG_FILTERS_MAX = 10
LAYER_FILTERS_MAX = 10
#: The ``layerId`` value that matches the locations on no layer.
NO_LAYER = "none"
#: Query parameters that may be given more than once, and keep every value.
REPEATABLE = ("tagId", "externalId", "layerId")

# A decimal number as a person or a map library writes it: no exponent, no
# spaces, no "nan" or "inf" (which float() would take).
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)", re.ASCII)


class BoundingBox(fields.Field):
    """``west,south,east,north`` in degrees -> a tuple of four floats.

    ``west > east`` is a box across the antimeridian, which is not an error.
    """

    default_error_messages = {
        "invalid": "Must be west,south,east,north: four decimal numbers.",
        "range": "Longitudes must be within -180..180 and latitudes within -90..90.",
        "order": "South must not be greater than north.",
    }

    def _deserialize(self, value, attr, data, **kwargs):
        parts = value.split(",") if isinstance(value, str) else ()
        if len(parts) != 4 or not all(_DECIMAL.fullmatch(part) for part in parts):
            raise self.make_error("invalid")
        west, south, east, north = (float(part) for part in parts)
        longitudes, latitudes = (west, east), (south, north)
        if not all(-180 <= x <= 180 for x in longitudes) or not all(
            -90 <= y <= 90 for y in latitudes
        ):
            raise self.make_error("range")
        if south > north:
            raise self.make_error("order")
        return west, south, east, north


class QueryId(fields.String):
    """An id in the query: any non-empty text (one that names nothing matches nothing)."""

    def __init__(self, **kwargs):
        super().__init__(validate=validate.Length(min=1, error="Must not be empty."), **kwargs)


class QueryIds(fields.Field):
    """A repeated id parameter: 1..``maximum`` non-empty values, as given."""

    def __init__(self, maximum: int, **kwargs):
        self.maximum = maximum
        metadata = {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "maxItems": maximum,
        }
        super().__init__(metadata={**metadata, **kwargs.pop("metadata", {})}, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        values = value if isinstance(value, list) else [value]
        if len(values) > self.maximum:
            raise ValidationError(f"May be given at most {self.maximum} times.")
        if not all(isinstance(item, str) and item for item in values):
            raise ValidationError("Must not be empty.")
        return values


class SearchText(Text):
    """``q``: 1..200 characters after trimming."""

    def __init__(self, **kwargs):
        super().__init__(validate=validate.Length(1, 200), **kwargs)


class LocationFilterSchema(Schema):
    """The filters and sort, shared by the list and the export."""

    class Meta:
        unknown = EXCLUDE  # unknown query parameters are ignored

    bbox = BoundingBox(
        metadata={
            "type": "string",
            "description": (
                "west,south,east,north in degrees; edges included; west > east is a box "
                "across the antimeridian."
            ),
            "example": "2.29,48.85,2.30,48.86",
        }
    )
    q = SearchText(
        metadata={
            "description": (
                "Lower-cased, a substring of the lower-cased name, description or address."
            )
        }
    )
    category_id = QueryId(data_key="categoryId", metadata={"description": "Locations in it."})
    tag_ids = QueryIds(
        TAG_FILTERS_MAX,
        data_key="tagId",
        metadata={"description": "Carrying every given tag (up to 10 times)."},
    )
    layer_ids = QueryIds(
        LAYER_FILTERS_MAX,
        data_key="layerId",
        metadata={
            "description": (
                "On any of the given layers (up to 10 times); `none`: on no layer."
            )
        },
    )
    updated_since = Timestamp(
        data_key="updatedSince", metadata={"description": "updatedAt at or after it."}
    )
    external_ids = QueryTexts(
        data_key="externalId",
        max_length=EXTERNAL_ID_MAX,
        max_count=BULK_MAX,
        metadata={
            "description": "This externalId (exact); up to 100 times, matching any.",
        },
    )
    sort = Choice(SORTS, load_default="createdAt")

    @pre_load
    def keep_repeated_values(self, data, **_kwargs):
        """A query string's repeatable parameters as lists; the others' first value."""
        if not hasattr(data, "getlist"):
            return data
        loaded = {key: data[key] for key in data}
        for key in REPEATABLE:
            if key in data:
                loaded[key] = data.getlist(key)
        return loaded


class LocationListQuerySchema(LocationFilterSchema, PageQuerySchema):
    """A page of a location list, filtered and sorted."""
