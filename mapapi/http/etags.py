"""Strong ETags of single resources, and the conditional requests they allow.

A resource's ETag is a hash of the body its GET answers: it changes exactly
when that body changes, whatever request changed it, and a create or an
update answering the same body carries the same ETag (a webhook's create
answers its secret too: the hash leaves it out). Which answers carry
one is read from the views' declarations: a 200 or 201 whose declared
response is one resource with an ``updatedAt`` (a map, location, category,
tag, layer, webhook; not a list, a bulk result, a key or a deletion).

``If-Match`` on PUT and DELETE is checked in the request's write
transaction, after the map holding the resource is locked (the lock every
write inside a map takes first; on SQLite the transaction holds the write
lock from its start): the ETag compared is the one the resource's own GET
view gives at that moment, and nobody can change it before this request's
write commits. So of two editors sending the same ``If-Match``, one wins.
A view with work that must not run under that lock checks ``If-Match``
itself, after that work (``checks_own_precondition``).
"""

import hashlib
from functools import cache

from flask import current_app, g, request
from flask.globals import request_ctx
from sqlalchemy import func, select
from werkzeug.exceptions import HTTPException

from ..contract.openapi import answers_one_resource
from ..extensions import db
from ..services.ownership import owned_map
from .errors import APIError
from .payload import without_shown_once

#: The methods whose change ``If-Match`` guards.
GUARDED_METHODS = frozenset({"PUT", "DELETE"})


def etag_of(body: bytes) -> str:
    """The opaque tag of ``body``, unquoted (128 bits of BLAKE2b: fast, and
    collisions are no worry); the header quotes it."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()


def add_etag(response):
    """Set ``ETag`` on a single resource's 200 or 201; answer 304 to a matching GET."""
    if response.status_code not in (200, 201):
        return response
    current = request._get_current_object()  # one context lookup, not one per use
    if not carries_etag(current.endpoint):
        return response
    etag = etag_of(without_shown_once(response))  # a create's: its GET's
    response.headers["ETag"] = f'"{etag}"'
    if (
        current.method == "GET"
        and "HTTP_IF_NONE_MATCH" in current.environ
        and current.if_none_match.contains_weak(etag)
    ):
        return _not_modified(etag)
    return response


def checks_own_precondition(view):
    """Mark a view that calls ``check_precondition`` itself, where it
    chooses: after work that must not run under the lock (a webhook URL's
    name lookup), before its validation and its write, which then share the
    transaction that compared."""
    view.checks_own_precondition = True
    return view


def check_precondition_before_view(current) -> None:
    """``check_precondition`` for the request hook, unless the view checks itself."""
    view = current_app.view_functions.get(current.endpoint) if current.endpoint else None
    if not getattr(view, "checks_own_precondition", False):
        check_precondition(current)


def check_precondition(current) -> None:
    """``If-Match`` on a PUT or DELETE ``current``: 412 PRECONDITION_FAILED
    unless it matches now.

    Runs after the body size (413) and before validation; an unknown
    resource is still 404, from its GET view.
    """
    # An empty If-Match names no entity-tag: no precondition (the body's
    # own errors answer, as without the header).
    if current.method not in GUARDED_METHODS or not current.headers.get("If-Match", "").strip():
        return
    if current.routing_exception is not None or g.get("account") is None:
        return
    resource = _resource_of_path()
    if resource is None:
        return
    endpoint, view_args = resource
    _lock(view_args)
    if not request.if_match.contains(_current_etag(endpoint, view_args)):
        raise APIError(
            412,
            "PRECONDITION_FAILED",
            "The resource has changed since the If-Match ETag was read; read it again.",
        )


@cache
def _declares_resource(view) -> bool:
    operation = getattr(view, "operation", None)
    return operation is not None and answers_one_resource(operation)


def carries_etag(endpoint: str | None) -> bool:
    """Whether the view ``endpoint`` answers one resource (and so an ETag)."""
    view = current_app.view_functions.get(endpoint) if endpoint else None
    return view is not None and _declares_resource(view)


def _resource_of_path():
    """The GET rule and arguments of the resource a PUT or DELETE changes.

    It is the resource at the same path, or, for a path without a GET of its
    own (a location's ``/layers``), at the path above it.
    """
    adapter = request_ctx.url_adapter
    path = request.path
    for candidate in (path, path.rsplit("/", 1)[0]):
        try:
            rule, view_args = adapter.match(candidate, method="GET", return_rule=True)
        except HTTPException:
            continue
        if carries_etag(rule.endpoint):
            return rule, view_args
        return None
    return None


def _lock(view_args: dict) -> None:
    """Lock what the resource's writers lock, so that it cannot change until we commit.

    A resource inside a map: the map's row lock (also a 404 for a map of
    nobody's). Elsewhere, on PostgreSQL: a transaction lock named by the
    account and path (SQLite's write transactions are serialized already).
    """
    if "map_id" in view_args:
        owned_map(view_args["map_id"])
    elif db.engine.dialect.name == "postgresql":
        name = f"{g.account.id} {request.path}"
        db.session.execute(
            select(func.pg_advisory_xact_lock(func.hashtextextended(name, 0)))
        )


def _current_etag(rule, view_args: dict) -> str:
    """The ETag the resource's GET view gives now, in this request's transaction."""
    view = current_app.view_functions[rule.endpoint]
    asked = request.url_rule
    request.url_rule = rule  # the view answers with its own declaration (respond)
    try:
        answer = current_app.make_response(view(**view_args))
    finally:
        request.url_rule = asked
    return etag_of(answer.get_data())


def _not_modified(etag: str):
    response = current_app.response_class(status=304)
    response.headers.pop("Content-Type", None)
    response.headers["ETag"] = f'"{etag}"'
    return response
