"""The two request hooks: the app's steps for every request and response.

What every answer gets whoever made it (request id, gzip, metrics, access
log) is the pipeline's, around the whole app (``pipeline.py``); these hooks
tell it the route and the account, which only the app knows.
"""

from dataclasses import dataclass

from flask import g, request

from . import auth, cors, etags, headers, idempotency, payload, ratelimit
from .errors import APIError, error_response
from .pipeline import record_of


@dataclass(frozen=True, slots=True)
class Steps:
    """The steps that matter for few requests, and whether they apply to
    one route and method: decided once, on the route's first request, so
    that where a step does not apply it costs nothing on every request (not
    even its own test of the method or the view's declaration)."""

    #: A POST: its Idempotency-Key is looked up, checked and settled.
    idempotency: bool
    #: A PUT or DELETE: its If-Match is checked.
    precondition: bool
    #: A view that answers one resource: its 200 and 201 carry an ETag.
    etag: bool
    #: A route with a bucket of its own (map creation, bulk, sync).
    route_bucket: bool


#: An unmatched request (404, 405): every step, each deciding for itself.
_EVERY_STEP = Steps(idempotency=True, precondition=True, etag=True, route_bucket=True)


def steps_of(current) -> Steps:
    """The steps of the request ``current``'s route and method (kept on the route)."""
    rule = current.url_rule
    if rule is None:
        return _EVERY_STEP
    plans = rule.__dict__.setdefault("mapapi_steps", {})
    found = plans.get(current.method)
    if found is None:
        endpoint = current.endpoint
        found = plans[current.method] = Steps(
            idempotency=current.method == "POST",
            precondition=current.method in etags.GUARDED_METHODS,
            etag=etags.carries_etag(endpoint),
            route_bucket=endpoint in ratelimit.ROUTE_BUCKETS,
        )
    return found


def before_request():
    """Every request's checks, in the contract's order.

    The general rate limit needs to know the account but must answer before
    a 401/403, so authentication is split around it. Routing (404/405) is
    known once the request is matched: an unknown route passes the steps
    that follow untouched and is answered when Flask dispatches. One hook
    calling the steps, rather than one hook per step, also saves Flask's
    per-hook work on every request. A browser's CORS preflight is answered
    right after the general rate limit: it carries no key.
    """
    current = request._get_current_object()  # one context lookup for the steps below
    record = record_of(current.environ)
    g.request_id = record.request_id
    rule = current.url_rule
    if rule is not None:
        record.route = rule.rule
    steps = g.steps = steps_of(current)
    auth.identify()
    ratelimit.check_general_limit()  # 1
    preflight = cors.preflight_response()
    if preflight is not None:
        return preflight
    refusal = auth.refusal()  # 2, 3
    if refusal is not None:
        return error_response(refusal)  # as its handler would, without the raise
    seen = idempotency.seen_before(current) if steps.idempotency else None  # 5
    if steps.route_bucket:
        ratelimit.check_route_limit(answered=seen is not None)  # 6
    if isinstance(seen, APIError):
        raise seen
    if seen is not None:
        return seen
    payload.check_body_size()  # 7: 413, then ownership and 412, then 400
    if steps.precondition:
        etags.check_precondition_before_view(current)
    if steps.idempotency:
        idempotency.check_key_format(current)
    return None


def after_request(response):
    """Every response's headers; the account that made it, for the access log."""
    steps = g.get("steps", _EVERY_STEP)  # none: a hook before failed
    if steps.idempotency:
        response = idempotency.finish(response)
    if steps.etag:
        response = etags.add_etag(response)
    response = ratelimit.add_rate_limit_headers(response)
    response = headers.add_standard_headers(response)
    response = cors.add_cors_headers(response)
    account = g.get("account")
    if account is not None:
        record_of(request.environ).account_id = account.id
    return response
