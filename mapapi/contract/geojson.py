"""GeoJSON (RFC 7946) in and out: the shapes of the export and the import,
and a Feature read as the input of a location create.

A Feature is read as the export writes it: a Point ``[lng, lat]`` (a third
number, altitude, is ignored) and the location's fields in ``properties``.
Any other property is the client's own data and joins the location's
``properties``. Errors are keyed the way the Feature is shaped:
``{"geometry": [...]}``, ``{"properties": {"name": [...]}}``.
The members GeoJSON tools write beside those (a Feature's ``id`` and
``bbox``, a collection's ``bbox``, and ``name`` and ``crs`` as QGIS writes
them) are accepted and ignored; any other is an unknown field, as in every
body of the API.
"""

import math

from marshmallow import EXCLUDE, INCLUDE, Schema, ValidationError, fields, validate

from .fields import IdList, Ignored, Timestamp
from .loading import compile_loader
from .schemas import BULK_MAX, SYNC_MAX, InputSchema, LocationInputSchema, batch_of

GEOJSON = "application/geo+json"
#: The Feature properties the import reads as the location's fields, besides
#: the name (``nameProperty``); ``createdAt`` and ``updatedAt`` are read and dropped.
FIELD_PROPERTIES = ("description", "address", "categoryId", "tagIds", "properties", "externalId")
DROPPED_PROPERTIES = ("createdAt", "updatedAt")
LAYER_IDS = "layerIds"
RESERVED_PROPERTIES = (*FIELD_PROPERTIES, LAYER_IDS, *DROPPED_PROPERTIES)

_load_location = compile_loader(LocationInputSchema())
_load_given = compile_loader(LocationInputSchema(partial=True))
_layer_ids = IdList(data_key=LAYER_IDS)
_COORDINATE_NAMES = {"lng": "Longitude (coordinates[0])", "lat": "Latitude (coordinates[1])"}


# --- documented shapes -----------------------------------------------------------


class PointSchema(Schema):
    type = fields.String(required=True, metadata={"enum": ["Point"]})
    coordinates = fields.List(
        fields.Float(),
        required=True,
        validate=validate.Length(2, 3),
        metadata={"description": "[longitude, latitude], or with an altitude (ignored)."},
    )


class PointInputSchema(InputSchema):
    type = fields.String(required=True, metadata={"enum": ["Point"]})
    coordinates = fields.List(
        fields.Float(),
        required=True,
        validate=validate.Length(2, 3),
        metadata={
            "description": "[longitude, latitude], or with an altitude (ignored).",
            "prefixItems": [
                {"type": "number", "minimum": -180, "maximum": 180},
                {"type": "number", "minimum": -90, "maximum": 90},
                {"type": "number"},
            ],
        },
    )
    bbox = Ignored()


class FeaturePropertiesSchema(Schema):
    """A location's fields as a Feature's ``properties``."""

    name = fields.String(required=True)
    description = fields.String(required=True)
    address = fields.String(required=True)
    category_id = fields.String(data_key="categoryId", allow_none=True, required=True)
    tag_ids = fields.List(fields.String(), data_key="tagIds", required=True)
    layer_ids = fields.List(
        fields.String(),
        data_key="layerIds",
        required=True,
        metadata={"description": "Its layers' ids, by order."},
    )
    properties = fields.Dict(required=True, metadata={"description": "The location's own."})
    external_id = fields.String(data_key="externalId", allow_none=True, required=True)
    created_at = Timestamp(data_key="createdAt", required=True)
    updated_at = Timestamp(data_key="updatedAt", required=True)


class FeatureSchema(Schema):
    type = fields.String(required=True, metadata={"enum": ["Feature"]})
    id = fields.String(required=True, metadata={"description": "The location's id."})
    geometry = fields.Nested(PointSchema, required=True)
    properties = fields.Nested(FeaturePropertiesSchema, required=True)


class FeatureCollectionSchema(Schema):
    """A map's locations as an RFC 7946 FeatureCollection."""

    type = fields.String(required=True, metadata={"enum": ["FeatureCollection"]})
    features = fields.List(fields.Nested(FeatureSchema), required=True)


class FeatureInputPropertiesSchema(Schema):
    """Read as a location create reads its body; any other key joins ``properties``."""

    class Meta:
        unknown = INCLUDE

    name = fields.String(
        validate=validate.Length(1, 200),
        metadata={"description": "Required, 1..200; or under the key nameProperty names."},
    )
    description = fields.String(validate=validate.Length(0, 10_000))
    address = fields.String(validate=validate.Length(0, 500))
    category_id = fields.String(data_key="categoryId", allow_none=True)
    tag_ids = fields.List(fields.String(), data_key="tagIds")
    layer_ids = fields.List(fields.String(), data_key="layerIds")
    properties = fields.Dict()
    external_id = fields.String(
        data_key="externalId",
        allow_none=True,
        validate=validate.Length(1, 200),
        metadata={"description": "Required of every Feature with upsert=true."},
    )


#: The members of a Feature that the import reads, and those it ignores.
FEATURE_MEMBERS = ("type", "geometry", "properties")
IGNORED_FEATURE_MEMBERS = ("id", "bbox")


class FeatureInputSchema(InputSchema):
    type = fields.String(required=True, metadata={"enum": ["Feature"]})
    geometry = fields.Nested(PointInputSchema, required=True)
    properties = fields.Nested(FeatureInputPropertiesSchema, required=True, allow_none=True)
    id = Ignored()
    bbox = Ignored()


class _CollectionMembers(InputSchema):
    """What a FeatureCollection may hold besides its Features."""

    type = fields.String(
        required=True,
        validate=validate.Equal("FeatureCollection", error='Must be "FeatureCollection".'),
        metadata={"enum": ["FeatureCollection"]},
    )
    bbox = Ignored()
    name = Ignored()
    crs = Ignored()


class ImportInputSchema(_CollectionMembers):
    """A FeatureCollection of 1 to 100 Features, each a location to create
    (1 to 1000 with ``upsert=true``, each a location to create or update)."""

    features = batch_of(
        fields.Nested(FeatureInputSchema),
        maximum=SYNC_MAX,
        metadata={"description": f"1 to {BULK_MAX} Features; with upsert=true, 1 to {SYNC_MAX}."},
    )


class ImportEnvelopeSchema(_CollectionMembers):
    """The import body without its Features, which are read one by one so
    that one answer names every bad Feature, database checks included."""

    features = batch_of(
        fields.Raw(allow_none=True), error=f"Must hold 1 to {BULK_MAX} Features."
    )


class ImportUpsertEnvelopeSchema(_CollectionMembers):
    """``ImportEnvelopeSchema`` of an ``upsert=true`` import."""

    features = batch_of(
        fields.Raw(allow_none=True),
        maximum=SYNC_MAX,
        error=f"Must hold 1 to {SYNC_MAX} Features with upsert=true.",
    )


class ImportQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE  # unknown query parameters are ignored

    name_property = fields.String(
        data_key="nameProperty",
        load_default="name",
        validate=[
            validate.Length(1, 200),
            validate.NoneOf(RESERVED_PROPERTIES, error="Names a property read as another field."),
        ],
        metadata={"description": "The Feature property read as the location's name."},
    )
    upsert = fields.Boolean(
        load_default=False,
        metadata={
            "description": (
                "Upsert the Features by their externalId (each needs one), answering "
                "200 as POST .../locations/upsert does."
            )
        },
    )


def asks_upsert(args) -> bool:
    """Whether the query ``args`` asks the import to upsert, read as
    ``ImportQuerySchema`` reads ``upsert`` (its first value)."""
    return args.get("upsert") in fields.Boolean.truthy


# --- reading a Feature -------------------------------------------------------------


def read_feature(
    feature, name_property: str, *, partial: bool = False
) -> tuple[dict | None, dict]:
    """``(location input, {})`` for a good Feature, its ``layer_ids`` included
    (loaded as a single create loads its body, or with ``partial`` as an
    update does: only the fields it gives); ``(None, errors)`` for a bad one."""
    if not isinstance(feature, dict):
        return None, {"_schema": ["Must be a GeoJSON Feature object."]}
    errors = {
        member: ["Unknown field."]
        for member in feature
        if member not in FEATURE_MEMBERS and member not in IGNORED_FEATURE_MEMBERS
    }
    if feature.get("type") != "Feature":
        errors["type"] = ['Must be "Feature".']
    raw = feature.get("properties")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        errors["properties"] = ["Must be an object or null."]
        raw = {}
    item, property_errors = _location_input(raw, name_property)
    try:
        item["lng"], item["lat"] = _coordinates(feature.get("geometry"))
    except ValidationError as error:
        errors["geometry"] = error.messages
    # A coordinate missing or not a number is said already; its range is not.
    ranges_checked = "geometry" not in errors
    layer_ids = None
    if LAYER_IDS in raw:
        try:
            layer_ids = _layer_ids.deserialize(raw[LAYER_IDS], LAYER_IDS, raw)
        except ValidationError as error:
            property_errors[LAYER_IDS] = error.messages
    try:
        loaded = (_load_given if partial else _load_location)(item)
    except ValidationError as error:
        loaded = None
        found = error.normalized_messages()
        for key in ("lng", "lat"):  # both named when both are wrong, longitude first
            if key in found and ranges_checked:
                named = [f"{_COORDINATE_NAMES[key]}: {message}" for message in found[key]]
                errors.setdefault("geometry", []).extend(named)
        for key, messages in found.items():
            if key == "name" and "name" not in item:
                property_errors[name_property] = [_missing_name(raw, name_property)]
            elif key not in _COORDINATE_NAMES:
                property_errors.setdefault(name_property if key == "name" else key, messages)
    if property_errors and not isinstance(errors.get("properties"), list):
        errors["properties"] = property_errors
    if errors:
        return None, errors
    if layer_ids is not None or not partial:
        loaded["layer_ids"] = layer_ids or []
    return loaded, {}


def _missing_name(raw: dict, name_property: str) -> str:
    """What to do about a Feature without a name: the import reads it from
    ``name_property``, which the query parameter ``nameProperty`` changes."""
    message = f"Missing: the location's name is read from the property {name_property!r}"
    others = [key for key in raw if key not in RESERVED_PROPERTIES and isinstance(raw[key], str)]
    if others:
        listed = ", ".join(repr(key) for key in others[:5])
        return (
            f"{message}; to read it from another property, pass its key as the query "
            f"parameter nameProperty (this Feature has {listed})."
        )
    return f"{message} (or the one the query parameter nameProperty names)."


def _location_input(raw: dict, name_property: str) -> tuple[dict, dict]:
    """A location create's body from a Feature's properties, and the errors
    of keys given both beside and inside ``properties``."""
    item = {key: raw[key] for key in FIELD_PROPERTIES if key in raw}
    if name_property in raw:
        item["name"] = raw[name_property]
    reserved = {name_property, *RESERVED_PROPERTIES}
    extra = {key: value for key, value in raw.items() if key not in reserved}
    errors = {}
    own = item.get("properties", {})
    if extra and isinstance(own, dict):
        for key in extra:
            if key in own:
                errors[key] = ["Given both as a Feature property and inside properties."]
        item["properties"] = {**own, **extra}
    return item, errors


def _coordinates(geometry) -> tuple:
    """``(lng, lat)`` of a Point geometry; any other shape is a ValidationError."""
    if not isinstance(geometry, dict):
        raise ValidationError("Must be a Point geometry object.")
    if geometry.get("type") != "Point":
        raise ValidationError('Must be a geometry of type "Point".')
    unknown = sorted(set(geometry) - {"type", "coordinates", "bbox"})
    if unknown:
        raise ValidationError(f"Unknown member: {unknown[0]}.")
    coordinates = geometry.get("coordinates")
    if not isinstance(coordinates, list) or not 2 <= len(coordinates) <= 3:
        raise ValidationError(
            "Coordinates must be [longitude, latitude], or with an altitude third."
        )
    wrong = [
        f"{name}: must be a finite JSON number."
        for name, value in zip(_COORDINATE_NAMES.values(), coordinates, strict=False)
        if not _is_finite_number(value)
    ]
    if len(coordinates) == 3 and not _is_finite_number(coordinates[2]):
        wrong.append("Altitude (coordinates[2]): must be a finite JSON number.")
    if wrong:
        raise ValidationError(wrong)
    return coordinates[0], coordinates[1]


def _is_finite_number(value) -> bool:
    if isinstance(value, bool):
        return False
    # An int is finite however large (the range check then refuses it);
    # math.isfinite would overflow on one past a float's range.
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
