"""APIError and the one place that turns any failure into the contract's body.

Everything that can go wrong ends here as ``{"error": {"code", "message"}}``
(plus ``details`` for field errors): our own APIError, werkzeug's HTTP
errors (unknown route, 405, 413), marshmallow's ValidationError, database
faults and anything unexpected, which is logged with the request id and
answered without internals.
"""

import logging
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from flask import g, jsonify
from sqlalchemy.exc import IntegrityError, OperationalError, StatementError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from werkzeug.exceptions import HTTPException

from ..extensions import db
from ..storage.failed_statements import describe, first_line
from .routing import allowed_methods

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Werkzeug's HTTP errors that a request can reach, by status.
HTTP_CODES = {
    400: ("VALIDATION_ERROR", "The request is malformed."),
    404: ("NOT_FOUND", "There is nothing at this address."),
    405: ("METHOD_NOT_ALLOWED", "This method is not allowed here."),
    413: ("PAYLOAD_TOO_LARGE", "The request body is larger than 2 MiB."),
}

#: Unique constraints whose violation is the client's conflict, not our bug.
CONFLICTS = {
    "uq_tags_map_id_name": "A tag with this name already exists on this map.",
    "uq_locations_map_id_external_id": "A location of this map already has this externalId.",
}


class APIError(Exception):
    """An error the contract names: raised by views and hooks, never returned."""

    def __init__(self, status: int, code: str, message: str, details=None, headers=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}


def not_found(what: str = "Resource") -> APIError:
    return APIError(404, "NOT_FOUND", f"{what} not found.")


def validation_error(message: str, details=None) -> APIError:
    return APIError(400, "VALIDATION_ERROR", message, details)


def conflict(message: str) -> APIError:
    return APIError(409, "CONFLICT", message)


def settled(check: Callable[[], T]) -> Callable[[], T]:
    """Run ``check`` now, answer later: the function returned gives its value,
    or raises what it refused with (an APIError or a ValidationError).

    For a check better done early that must still answer in the contract's
    order, after another check made later (a map's 404 before a body's 400).
    """
    # Imported here, as below: the commands that use APIError load no bodies.
    from marshmallow import ValidationError

    try:
        value = check()
    except (APIError, ValidationError) as refusal:
        return partial(_raise, refusal)
    return lambda: value


def _raise(error: Exception):
    raise error


def error_response(error: APIError):
    body = {"code": error.code, "message": error.message}
    if error.details is not None:
        body["details"] = error.details
    response = jsonify(error=body)
    response.status_code = error.status
    response.headers.update(error.headers)
    return response


def stringify_keys(messages):
    """marshmallow keys list items by int; JSON objects need string keys."""
    if isinstance(messages, dict):
        return {str(key): stringify_keys(value) for key, value in messages.items()}
    return messages


def register_error_handlers(app) -> None:
    from marshmallow import ValidationError

    app.register_error_handler(APIError, error_response)
    app.register_error_handler(HTTPException, _handle_http_exception)
    app.register_error_handler(ValidationError, _handle_validation_error)
    app.register_error_handler(IntegrityError, _handle_integrity_error)
    app.register_error_handler(OperationalError, _handle_database_unavailable)
    app.register_error_handler(PoolTimeoutError, _handle_database_unavailable)
    app.register_error_handler(Exception, _handle_unexpected)


def _handle_http_exception(exc: HTTPException):
    if exc.code not in HTTP_CODES:
        return _handle_unexpected(exc)
    status, headers = exc.code, {}
    if status == 405:
        allowed = allowed_methods()
        if allowed:
            headers["Allow"] = ", ".join(allowed)
        else:  # only a variable fits, and it refused a fixed segment: no such path
            status = 404
    code, message = HTTP_CODES[status]
    return error_response(APIError(status, code, message, headers=headers))


def _handle_validation_error(exc):
    """marshmallow's ValidationError."""
    return error_response(
        validation_error("The request is invalid.", stringify_keys(exc.normalized_messages()))
    )


def _handle_integrity_error(exc: IntegrityError):
    db.session.rollback()
    constraint = violated_unique_constraint(exc)
    if constraint in CONFLICTS:
        return error_response(conflict(CONFLICTS[constraint]))
    return _handle_unexpected(exc)


def _handle_database_unavailable(exc: Exception):
    db.session.rollback()
    # Named by its table and error: the error's own text may quote values.
    reason = describe(exc) if isinstance(exc, StatementError) else first_line(exc)
    log.error("database unavailable (request %s): %s", g.get("request_id"), reason)
    return error_response(
        APIError(503, "SERVICE_UNAVAILABLE", "The database cannot be reached; try again shortly.")
    )


def _handle_unexpected(exc: Exception):
    # One line, the exception described safely: log_output.OneLineFormatter.
    log.exception("unexpected error (request %s)", g.get("request_id"), exc_info=exc)
    db.session.rollback()
    return error_response(APIError(500, "INTERNAL_ERROR", "An unexpected error occurred."))


def violated_unique_constraint(exc: IntegrityError) -> str | None:
    """The name of the unique constraint an IntegrityError reports, if any.

    PostgreSQL names the constraint (or unique index); SQLite names its
    columns, which are matched against the unique constraints and indexes
    declared in the models.
    """
    diagnostics = getattr(exc.orig, "diag", None)
    if diagnostics is not None:
        return diagnostics.constraint_name
    message = str(exc.orig)
    for table in db.metadata.tables.values():
        unique_indexes = [index for index in table.indexes if index.unique]
        for constraint in [*table.constraints, *unique_indexes]:
            columns = ", ".join(f"{table.name}.{column.name}" for column in constraint.columns)
            if constraint.name and message == f"UNIQUE constraint failed: {columns}":
                return constraint.name
    return None
