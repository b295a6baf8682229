"""The two request hooks: the steps every request and every response pass."""

from flask import request

from . import access_log, auth, compression, cors, etags, headers, idempotency, payload, ratelimit
from . import request_metrics
from .errors import APIError, error_response


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
    access_log.start_timer()
    headers.assign_request_id()
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
    """Every response's headers, its encoding (last: it changes the body), its
    count in the metrics, its log line."""
    response = idempotency.finish(response)
    response = etags.add_etag(response)
    response = ratelimit.add_rate_limit_headers(response)
    response = headers.add_standard_headers(response)
    response = cors.add_cors_headers(response)
    response = compression.compress(response)
    response = request_metrics.observe(response)
    return access_log.log_request(response)
