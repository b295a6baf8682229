"""Checks of the contract's envelopes, and a free local port."""

import re
import socket

from .factories import error_code

ERROR_KEYS = {"code", "message", "details"}


def data_of(response, status=200):
    """The payload of a success envelope, asserting the status and the shape."""
    body = response.get_json()
    assert response.status_code == status, body
    assert set(body) == {"data"}, body
    return body["data"]


def field_errors(response) -> dict:
    """The ``details`` of a VALIDATION_ERROR, each a non-empty list of messages."""
    assert response.status_code == 400, response.get_json()
    assert error_code(response) == "VALIDATION_ERROR"
    details = response.get_json()["error"]["details"]
    for messages in details.values():
        assert isinstance(messages, list) and messages, details
        assert all(isinstance(message, str) and message for message in messages), details
    return details


def outcome(response):
    """``(status, code, sorted detail fields)`` of an error, to compare many at once."""
    body = response.get_json()
    error = body.get("error") if set(body) == {"error"} else None
    if not isinstance(error, dict) or not {"code", "message"} <= set(error) <= ERROR_KEYS:
        return response.status_code, body
    details = error.get("details", {})
    for messages in details.values():
        if not isinstance(messages, list) or not messages:
            return response.status_code, body
        if not all(isinstance(message, str) and message for message in messages):
            return response.status_code, body
    return response.status_code, error["code"], sorted(details)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


LOCATION_FIELDS = {
    "id", "mapId", "name", "lat", "lng", "description", "address", "categoryId",
    "tagIds", "properties", "layers", "createdAt", "updatedAt",
}
LAYER_FIELDS = {
    "id", "mapId", "name", "color", "order", "routeEnabled", "routeShowByDefault",
    "createdAt", "updatedAt",
}
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TICK = 0.005  # longer than a millisecond, so timestamps of two writes differ


def validation_details(response) -> dict:
    """The ``details`` of a 400 VALIDATION_ERROR ``response``."""
    assert response.status_code == 400, response.get_json()
    assert error_code(response) == "VALIDATION_ERROR"
    body = response.get_json()["error"]
    assert isinstance(body["message"], str) and body["message"]
    assert "details" in body, body
    return body["details"]
