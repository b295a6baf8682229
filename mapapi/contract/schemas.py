"""One input and one output schema per resource, and the list shape.

Input schemas raise on unknown fields and accept (then drop) the read-only
fields their resource's GET returns, so GET-modify-PUT works. Schemas never
touch the database: rules that need it live in ``mapapi.services``.
"""

from marshmallow import (
    EXCLUDE,
    RAISE,
    Schema,
    ValidationError,
    fields,
    post_load,
    validate,
)

from .scopes import SCOPES
from ..timeutil import utcnow
from .fields import (
    Choice,
    Color,
    IdList,
    Ignored,
    Properties,
    QueryInteger,
    StrictBoolean,
    StrictFloat,
    StrictInteger,
    Text,
    Timestamp,
    check_text,
    in_the_future,
)

MAP_STYLES = ("streets", "outdoors", "light", "dark", "satellite", "satellite-streets")
DEFAULT_LAYER_COLOR = "#3B82F6"
#: Items of a bulk create and of a plain import.
BULK_MAX = 100
#: Items of the bodies that keep a map in step: upsert, bulk delete, import?upsert=true.
SYNC_MAX = 1000
EXTERNAL_ID_MAX = 200


def _length(maximum: int, minimum: int = 0):
    return validate.Length(min=minimum, max=maximum)


def batch_of(
    item: fields.Field,
    *,
    maximum: int = BULK_MAX,
    required: bool = True,
    error: str | None = None,
    **kwargs,
) -> fields.List:
    """A list of 1 to ``maximum`` ``item``s, the many-item bodies' one rule:
    ``BULK_MAX`` for the bulk and the import, ``SYNC_MAX`` for upsert and bulk
    delete; ``error`` replaces marshmallow's message, ``kwargs`` go to the
    List (a ``data_key``)."""
    length = validate.Length(min=1, max=maximum, error=error)
    return fields.List(item, required=required, validate=length, **kwargs)


# --- inputs -----------------------------------------------------------------


class InputSchema(Schema):
    class Meta:
        unknown = RAISE

    @post_load
    def drop_ignored(self, data, **_kwargs):
        return {
            name: value
            for name, value in data.items()
            if not isinstance(self.fields[name], Ignored)
        }


class MapChildInput(InputSchema):
    """The read-only fields shared by everything that lives in a map."""

    id = Ignored()
    map_id = Ignored(data_key="mapId")
    created_at = Ignored(data_key="createdAt")
    updated_at = Ignored(data_key="updatedAt")


class MapInputSchema(InputSchema):
    title = Text(required=True, validate=_length(200, 1))
    description = Text(load_default="", validate=_length(10_000))
    country = Text(load_default="", validate=_length(100))
    city = Text(load_default="", validate=_length(100))
    public = StrictBoolean(load_default=False)
    allow_cloning = StrictBoolean(data_key="allowCloning", load_default=True)
    style = Choice(MAP_STYLES, load_default="streets")
    center_lat = StrictFloat(
        data_key="centerLat", allow_none=True, load_default=None, validate=validate.Range(-90, 90)
    )
    center_lng = StrictFloat(
        data_key="centerLng", allow_none=True, load_default=None, validate=validate.Range(-180, 180)
    )
    zoom = StrictFloat(allow_none=True, load_default=None, validate=validate.Range(0, 22))

    id = Ignored()
    slug = Ignored()
    user_id = Ignored(data_key="userId")
    created_at = Ignored(data_key="createdAt")
    updated_at = Ignored(data_key="updatedAt")


class LocationInputSchema(MapChildInput):
    name = Text(required=True, validate=_length(200, 1))
    lat = StrictFloat(required=True, validate=validate.Range(-90, 90))
    lng = StrictFloat(required=True, validate=validate.Range(-180, 180))
    description = Text(load_default="", validate=_length(10_000))
    address = Text(load_default="", validate=_length(500))
    category_id = fields.String(data_key="categoryId", allow_none=True, load_default=None)
    tag_ids = IdList(data_key="tagIds", load_default=list)
    properties = Properties(load_default=dict)
    external_id = Text(
        data_key="externalId",
        allow_none=True,
        load_default=None,
        validate=_length(EXTERNAL_ID_MAX, 1),
        metadata={
            "description": "The location's id in the client's own system; unique on the map."
        },
    )
    # Input only: a location shows its layers as ``layers``.
    layer_ids = IdList(
        data_key="layerIds",
        load_default=list,
        metadata={"description": "The location's layers; on update, replaces the whole set."},
    )

    layers = Ignored()


class BulkInputSchema(InputSchema):
    """A bulk create: 1 to 100 locations, each as a single create takes it."""

    locations = batch_of(fields.Nested(LocationInputSchema))


class BulkEnvelopeSchema(BulkInputSchema):
    """The bulk body without its items, which the view validates one by one
    so that one answer can name every bad item, database checks included."""

    locations = batch_of(fields.Raw(allow_none=True))


class UpsertItemSchema(LocationInputSchema):
    """An upsert item: a location matched by its ``externalId``, which it
    must have. ``name``, ``lat`` and ``lng`` are required only of an item
    that creates (``NewUpsertItemSchema``); one that names an existing
    location is read as a PUT reads it (see ``api.locations``)."""

    #: Fields that only an item creating a location must have.
    CREATE_ONLY = ("name", "lat", "lng")

    external_id = Text(data_key="externalId", required=True, validate=_length(EXTERNAL_ID_MAX, 1))

    def on_bind_field(self, field_name, field_obj):
        if field_name in self.CREATE_ONLY:
            field_obj.required = False


class NewUpsertItemSchema(UpsertItemSchema):
    """An upsert item that creates a location: as a create reads it."""

    CREATE_ONLY = ()


class UpsertInputSchema(InputSchema):
    """An upsert: 1 to 1000 locations matched by their ``externalId``."""

    locations = batch_of(fields.Nested(UpsertItemSchema), maximum=SYNC_MAX)


class UpsertEnvelopeSchema(UpsertInputSchema):
    """The upsert body without its items, which the view reads one by one
    (as ``BulkEnvelopeSchema``)."""

    locations = batch_of(fields.Raw(allow_none=True), maximum=SYNC_MAX)


class BulkDeleteInputSchema(InputSchema):
    """``ids`` or ``externalIds``, exactly one of the two, 1 to 1000 names."""

    ids = batch_of(fields.String(validate=check_text), maximum=SYNC_MAX, required=False)
    external_ids = batch_of(
        Text(validate=_length(EXTERNAL_ID_MAX, 1)),
        maximum=SYNC_MAX,
        required=False,
        data_key="externalIds",
    )

    @post_load
    def exactly_one(self, data, **_kwargs):
        given = [key for key in ("ids", "external_ids") if key in data]
        if len(given) == 2:
            raise ValidationError("Give ids or externalIds, not both.", "externalIds")
        if not given:
            message = "Give ids or externalIds (exactly one of the two)."
            raise ValidationError({"ids": [message], "externalIds": [message]})
        return data


class LayerMembershipInputSchema(InputSchema):
    layer_ids = IdList(data_key="layerIds", required=True)


class LayerInputSchema(MapChildInput):
    name = Text(required=True, validate=_length(100, 1))
    color = Color(load_default=DEFAULT_LAYER_COLOR)
    order = StrictInteger(validate=validate.Range(min=0))
    route_enabled = StrictBoolean(data_key="routeEnabled", load_default=False)
    route_show_by_default = StrictBoolean(data_key="routeShowByDefault", load_default=False)


class CategoryInputSchema(MapChildInput):
    name = Text(required=True, validate=_length(100, 1))
    color = Color(allow_none=True, load_default=None)
    icon = Text(load_default="", validate=_length(50))


class TagInputSchema(MapChildInput):
    name = Text(required=True, validate=_length(50, 1))
    color = Color(allow_none=True, load_default=None)


class KeyInputSchema(InputSchema):
    name = Text(required=True, validate=_length(100, 1))
    scope = Choice(SCOPES, required=True)
    expires_at = Timestamp(
        data_key="expiresAt",
        allow_none=True,
        load_default=None,
        validate=in_the_future,
        metadata={"description": "When the key stops working: in the future, or null for never."},
    )

    id = Ignored()
    status = Ignored()
    prefix = Ignored()
    created_at = Ignored(data_key="createdAt")
    last_used_at = Ignored(data_key="lastUsedAt")


# --- outputs ----------------------------------------------------------------


class OutputSchema(Schema):
    """Every field of a resource is always present in what the API returns,
    but ``optional_fields``: a secret, which a replayed create leaves out."""

    optional_fields: tuple[str, ...] = ()

    id = fields.String()
    created_at = Timestamp(data_key="createdAt")

    def on_bind_field(self, field_name, field_obj):
        field_obj.required = field_name not in self.optional_fields


class MapChildSchema(OutputSchema):
    map_id = fields.String(data_key="mapId")
    updated_at = Timestamp(data_key="updatedAt")


class MapSchema(OutputSchema):
    title = fields.String()
    slug = fields.String()
    description = fields.String()
    country = fields.String()
    city = fields.String()
    public = fields.Boolean()
    allow_cloning = fields.Boolean(data_key="allowCloning")
    style = fields.String()
    center_lat = fields.Float(data_key="centerLat", allow_none=True)
    center_lng = fields.Float(data_key="centerLng", allow_none=True)
    zoom = fields.Float(allow_none=True)
    user_id = fields.String(attribute="account_id", data_key="userId")
    updated_at = Timestamp(data_key="updatedAt")


class LayerSchema(MapChildSchema):
    name = fields.String()
    color = fields.String()
    order = fields.Integer(attribute="position")
    route_enabled = fields.Boolean(data_key="routeEnabled")
    route_show_by_default = fields.Boolean(data_key="routeShowByDefault")


class LocationSchema(MapChildSchema):
    name = fields.String()
    lat = fields.Float()
    lng = fields.Float()
    description = fields.String()
    address = fields.String()
    category_id = fields.String(data_key="categoryId", allow_none=True)
    properties = fields.Dict()
    external_id = fields.String(data_key="externalId", allow_none=True)
    # Its relations last: mapapi.services.location_reads reads the fields
    # above as one row and appends these.
    tag_ids = fields.List(fields.String(), data_key="tagIds")
    layers = fields.List(fields.Nested(LayerSchema))


class BulkResultSchema(Schema):
    created = fields.List(fields.Nested(LocationSchema), required=True)
    count = fields.Integer(required=True)


class UpsertResultSchema(Schema):
    locations = fields.List(fields.Nested(LocationSchema), required=True)
    created = fields.Integer(required=True)
    updated = fields.Integer(required=True)
    unchanged = fields.Integer(required=True)


class BulkDeleteResultSchema(Schema):
    deleted = fields.List(fields.String(), required=True)
    count = fields.Integer(required=True)


class CategorySchema(MapChildSchema):
    name = fields.String()
    color = fields.String(allow_none=True)
    icon = fields.String()


class TagSchema(MapChildSchema):
    name = fields.String()
    color = fields.String(allow_none=True)


class KeySchema(OutputSchema):
    name = fields.String()
    scope = fields.String()
    expires_at = Timestamp(data_key="expiresAt", allow_none=True)
    status = fields.Function(
        lambda key: key.status(utcnow()),
        metadata={"enum": ["active", "expired", "revoked"], "type": "string"},
    )
    prefix = fields.String()
    last_used_at = Timestamp(data_key="lastUsedAt", allow_none=True)


class CreatedKeySchema(KeySchema):
    """The one response that shows a key's secret (not a replay of it: the
    secret is never stored)."""

    optional_fields = ("key",)

    key = fields.String(attribute="secret")


class GrantSchema(OutputSchema):
    """An assistant or app the account connected with OAuth."""

    client_name = fields.String(data_key="clientName", attribute="client.name")
    client_id = fields.String(data_key="clientId", attribute="client.client_id")
    redirect_host = fields.Function(
        lambda grant: grant.redirect_host, data_key="redirectHost", metadata={"type": "string"}
    )
    scope = fields.String(metadata={"enum": ["mapapi:read", "mapapi:read mapapi:write"]})
    last_used_at = Timestamp(data_key="lastUsedAt", allow_none=True)


class DeletedSchema(Schema):
    id = fields.String(required=True)
    deleted = fields.Boolean(required=True, metadata={"const": True})


# --- the change feed ----------------------------------------------------------

_CHANGES = ("created", "updated", "deleted")
#: Each resource of the feed and what its events say happened to it; a
#: webhook endpoint's one event is the service switching it off.
EVENT_ACTIONS = {
    "map": _CHANGES,
    "location": _CHANGES,
    "category": _CHANGES,
    "tag": _CHANGES,
    "layer": _CHANGES,
    "webhook": ("disabled",),
}
EVENT_RESOURCES = tuple(EVENT_ACTIONS)
EVENT_TYPES = tuple(
    f"{resource}.{action}" for resource, actions in EVENT_ACTIONS.items() for action in actions
)
EVENT_PATTERNS = frozenset(EVENT_TYPES) | {f"{resource}.*" for resource in EVENT_RESOURCES}
#: The largest event id a cursor may hold (PostgreSQL's bigint).
EVENT_ID_MAX = 2**63 - 1


class EventCursor(fields.String):
    """``after``: an event id, ``latest``, or ``null`` (the same as none)."""

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if value in ("latest", "null"):
            return None if value == "null" else value
        if not value.isascii() or not value.isdigit() or int(value) > EVENT_ID_MAX:
            raise ValidationError("Not an event id: pass back a `next` the feed returned.")
        return int(value)


class EventTypes(fields.String):
    """``types``: comma-separated event types or ``<resource>.*`` patterns."""

    def _deserialize(self, value, attr, data, **kwargs):
        text = super()._deserialize(value, attr, data, **kwargs)
        names = [name.strip() for name in text.split(",")]
        unknown = [name for name in names if name not in EVENT_PATTERNS]
        if unknown:
            raise ValidationError([f"Not an event type: {name!r}." for name in unknown])
        return names


class EventQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE  # unknown query parameters are ignored

    after = EventCursor(
        load_default=None, metadata={"description": "an event id, `latest` or `null`"}
    )
    limit = QueryInteger(load_default=50, validate=validate.Range(1, 100))
    map_id = fields.String(data_key="mapId")
    types = EventTypes(metadata={"description": "comma-separated types or `<resource>.*`"})


class EventSchema(Schema):
    id = fields.String(required=True)
    type = fields.String(required=True, metadata={"enum": list(EVENT_TYPES)})
    created_at = Timestamp(data_key="createdAt", required=True)
    map_id = fields.String(data_key="mapId", required=True, allow_none=True)
    data = fields.Dict(required=True, metadata={"description": "the resource as its GET returned it"})


class EventFeedSchema(Schema):
    events = fields.List(fields.Nested(EventSchema), required=True)
    next = fields.String(required=True, allow_none=True)
    has_more = fields.Boolean(data_key="hasMore", required=True)


class BucketSchema(Schema):
    limit = fields.Integer(required=True)
    remaining = fields.Integer(required=True)
    reset = fields.Integer(
        required=True, metadata={"description": "Unix seconds: when it next regains capacity (now when full)"}
    )
    window = fields.String(required=True, metadata={"description": "the setting, e.g. 100 per hour"})


class BucketsSchema(Schema):
    general = fields.Nested(BucketSchema, required=True)
    map_creation = fields.Nested(BucketSchema, data_key="mapCreation", required=True)
    bulk = fields.Nested(BucketSchema, required=True)
    sync = fields.Nested(BucketSchema, required=True)


class RateLimitsSchema(Schema):
    buckets = fields.Nested(BucketsSchema, required=True)
