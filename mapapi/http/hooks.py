"""The two request hooks: the app's steps for every request and response.

What every answer gets whoever made it (request id, gzip, metrics, access
log) is the pipeline's, around the whole app (``pipeline.py``); these hooks
tell it the route and the account, which only the app knows.
"""

from flask import g, request

from . import auth, cors, etags, headers, idempotency, payload, ratelimit
from .errors import APIError, error_response
from .pipeline import record_of


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
    auth.identify()
    ratelimit.check_general_limit()  # 1
    preflight = cors.preflight_response()
    if preflight is not None:
        return preflight
    refusal = auth.refusal()  # 2, 3
    if refusal is not None:
        return error_response(refusal)  # as its handler would, without the raise
    seen = idempotency.seen_before(current)  # 5
    ratelimit.check_route_limit(answered=seen is not None)  # 6
    if isinstance(seen, APIError):
        raise seen
    if seen is not None:
        return seen
    payload.check_body_size()  # 7: 413, then ownership and 412, then 400
    etags.check_precondition_before_view(current)
    idempotency.check_key_format(current)
    return None


def after_request(response):
    """Every response's headers; the account that made it, for the access log."""
    response = idempotency.finish(response)
    response = etags.add_etag(response)
    response = ratelimit.add_rate_limit_headers(response)
    response = headers.add_standard_headers(response)
    response = cors.add_cors_headers(response)
    account = g.get("account")
    if account is not None:
        record_of(request.environ).account_id = account.id
    return response
