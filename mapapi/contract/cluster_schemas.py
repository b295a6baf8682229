"""The clusters of a viewport: its query, and the answer's shape."""

from marshmallow import Schema, fields, validate

from .fields import QueryInteger
from .location_query import BoundingBox, LocationFilterSchema
from .schemas import LocationSchema

MAX_ZOOM = 22
#: The most clusters and lone locations one answer holds.
MAX_ITEMS = 2000


class ClusterQuerySchema(LocationFilterSchema):
    """A viewport (``bbox``, required) at a zoom, and the list's filters; no sort."""

    class Meta(LocationFilterSchema.Meta):
        exclude = ("sort",)

    bbox = BoundingBox(
        required=True,
        metadata={
            "type": "string",
            "description": (
                "west,south,east,north (west > east: across the antimeridian); "
                "at most 2,000 64-pixel cells at zoom."
            ),
            "example": "-10.5,35.2,30.1,60.3",
        },
    )
    zoom = QueryInteger(
        required=True,
        validate=validate.Range(0, MAX_ZOOM),
        metadata={"description": "The web map's zoom level the answer is drawn at, 0..22."},
    )


class ClusterSchema(Schema):
    """Two or more locations of one 64-pixel cell, inside the viewport."""

    lat = fields.Float(required=True, metadata={"description": "The mean of their lat."})
    lng = fields.Float(required=True, metadata={"description": "The mean of their lng."})
    count = fields.Integer(required=True, metadata={"description": "How many they are."})
    bbox = fields.List(
        fields.Float(),
        required=True,
        metadata={"description": "Their box: [minLng, minLat, maxLng, maxLat]."},
    )


class ClustersSchema(Schema):
    """A viewport's locations: grouped where dense, one by one elsewhere."""

    clusters = fields.List(fields.Nested(ClusterSchema), required=True)
    locations = fields.List(
        fields.Nested(LocationSchema),
        required=True,
        metadata={"description": "The lone locations, as the list gives them."},
    )
    total = fields.Integer(
        required=True,
        metadata={"description": "Every matching location in the box: the counts plus the lone ones."},
    )
