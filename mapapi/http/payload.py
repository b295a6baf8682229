"""Reading request bodies and writing the success envelope."""

import json

from flask import current_app, jsonify, request
from marshmallow import Schema, ValidationError

from ..contract.loading import Loader
from ..contract.openapi import current_operation
from .auth import MCP_PATH
from .errors import APIError, stringify_keys, validation_error

#: Fields of a created resource that hold a secret shown once (a key's
#: ``key``, a webhook's ``secret``): never stored, never in a GET.
SHOWN_ONCE_FIELDS = ("key", "secret")


def json_body(media_types: tuple[str, ...] | None = None) -> dict:
    """The request body as a JSON object, or VALIDATION_ERROR without details.

    Read strictly: the Content-Type must be one the view declares (or
    ``media_types``), ``application/json`` unless it says otherwise (parameters allowed), and
    the bytes valid UTF-8. Reading the body is also where an oversized one
    is refused with 413 (Flask's MAX_CONTENT_LENGTH).
    """
    media_types = media_types or current_operation().body_media_types
    if request.mimetype not in media_types:
        raise validation_error(f"The Content-Type must be {' or '.join(media_types)}.")
    raw = request.get_data(cache=True)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise validation_error("The request body is not valid UTF-8 JSON.") from None
    if not isinstance(data, dict):
        raise validation_error("The request body must be a JSON object.")
    return data


def load_body(*, partial: bool = False, schema: Schema | None = None) -> dict:
    """Parse the body and load it with the view's declared body schema."""
    if schema is None and not partial:
        return current_operation().load(json_body())
    return (schema or current_operation().body).load(json_body(), partial=partial)


def load_items(items: list, load: Loader) -> tuple[dict[int, dict], dict[int, dict]]:
    """The items of a many-item body (bulk, upsert) that ``load`` takes, and
    the field errors of the others, each by its index."""
    loaded, errors = {}, {}
    for index, item in enumerate(items):
        try:
            loaded[index] = load(item)
        except ValidationError as error:
            errors[index] = stringify_keys(error.normalized_messages())
    return loaded, errors


def raise_item_errors(errors: dict[int, dict], message: str, key: str = "locations") -> None:
    """VALIDATION_ERROR naming every bad item by index under ``key``, if any is."""
    if errors:
        details = {str(index): errors[index] for index in sorted(errors)}
        raise validation_error(message, {key: details})


def load_query() -> dict:
    """The query string, loaded with the view's declared query schema."""
    return current_operation().query.load(request.args)


def respond(value):
    """``{"data": ...}``: ``value`` dumped with the view's declared response
    schema, with its declared success status."""
    return respond_dumped(current_operation().dump(value))


def respond_dumped(data, status: int | None = None):
    """``{"data": data}`` for ``data`` read already in the shape of the view's
    declared response schema, with its declared success status (or ``status``)."""
    response = jsonify(data=data)
    response.status_code = status or current_operation().status
    return response


def without_shown_once(response) -> bytes:
    """The answer's body without a secret shown once, written as the view
    writes bodies: a create's answer as its GET then gives it."""
    body = response.get_data()
    if not any(f'"{name}"'.encode() in body for name in SHOWN_ONCE_FIELDS):
        return body
    document = json.loads(body)
    data = document.get("data")
    if not isinstance(data, dict) or not any(name in data for name in SHOWN_ONCE_FIELDS):
        return body
    for name in SHOWN_ONCE_FIELDS:
        data.pop(name, None)
    return current_app.json.response(document).get_data()


def check_body_size() -> None:
    """Refuse a declared body over the limit before any id or field is looked at.

    An unknown route or method answers 404/405 first, as the contract orders;
    ``/mcp`` checks the size itself, after the key and the buckets.
    """
    if request.routing_exception is not None or request.path == MCP_PATH:
        return
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    if request.content_length is not None and request.content_length > limit:
        raise APIError(413, "PAYLOAD_TOO_LARGE", "The request body is larger than 2 MiB.")
