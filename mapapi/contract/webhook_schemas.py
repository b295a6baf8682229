"""The shapes of webhook endpoints, their delivery attempts and a ping."""

from marshmallow import Schema, fields, validate

from .fields import Choice, Ignored, StrictBoolean, Text, Timestamp
from .schemas import EVENT_RESOURCES, EVENT_TYPES, InputSchema, OutputSchema

#: What an endpoint's ``events`` may hold: a type, ``<resource>.*`` or ``*``.
EVENT_SELECTORS = (*EVENT_TYPES, *(f"{resource}.*" for resource in EVENT_RESOURCES), "*")
EVENTS_MAX = 20
URL_MAX_LENGTH = 2000


class WebhookInputSchema(InputSchema):
    url = Text(
        required=True,
        validate=validate.Length(1, URL_MAX_LENGTH),
        metadata={
            "description": "http or https, without user information; not inside the network.",
            "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^@/?#\\s]+([/?#]\\S*)?$",
        },
    )
    events = fields.List(
        Choice(EVENT_SELECTORS),
        required=True,
        validate=validate.Length(1, EVENTS_MAX),
        metadata={"description": "Event types, `<resource>.*` or `*`."},
    )
    map_id = fields.String(
        data_key="mapId",
        allow_none=True,
        load_default=None,
        metadata={"description": "Only this map's events; null for every map."},
    )
    description = Text(load_default="", validate=validate.Length(max=500))
    enabled = StrictBoolean(load_default=True)

    id = Ignored()
    disabled_reason = Ignored(data_key="disabledReason")
    created_at = Ignored(data_key="createdAt")
    updated_at = Ignored(data_key="updatedAt")


class WebhookSchema(OutputSchema):
    url = fields.String()
    events = fields.List(fields.String())
    map_id = fields.String(data_key="mapId", allow_none=True)
    description = fields.String()
    enabled = fields.Boolean()
    disabled_reason = fields.String(
        data_key="disabledReason",
        allow_none=True,
        metadata={
            "description": "Why the service disabled it (every attempt failed for "
            "`MAPAPI_WEBHOOKS_DISABLE_AFTER_HOURS`); null otherwise. A PUT that "
            "enables it clears it."
        },
    )
    updated_at = Timestamp(data_key="updatedAt")


class CreatedWebhookSchema(WebhookSchema):
    """The one response that shows the endpoint's signing secret (not a replay
    of it: the kept answer holds no secret)."""

    optional_fields = ("secret",)

    secret = fields.String(
        metadata={"description": "`whsec_` + base64 of 32 random bytes; shown once."}
    )


class DeliverySchema(OutputSchema):
    created_at = Timestamp(
        data_key="createdAt",
        metadata={
            "description": "When the attempt was made; while it is pending, when it was scheduled."
        },
    )
    event_id = fields.String(data_key="eventId")
    event_type = fields.String(data_key="eventType")
    attempt = fields.Integer(metadata={"minimum": 1, "maximum": 8})
    status = fields.String(metadata={"enum": ["pending", "succeeded", "failed"]})
    response_status = fields.Integer(data_key="responseStatus", allow_none=True)
    error = fields.String(allow_none=True)
    duration_ms = fields.Integer(data_key="durationMs", allow_none=True)
    next_attempt_at = Timestamp(data_key="nextAttemptAt", allow_none=True)


class PingSchema(Schema):
    event_id = fields.String(data_key="eventId", required=True)
