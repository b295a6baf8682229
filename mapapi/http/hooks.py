"""The two request hooks: the steps every request and every response pass."""

from . import access_log, auth, compression, cors, headers, payload, ratelimit


def before_request():
    """Every request's checks, in the contract's order.

    The general rate limit needs to know the account but must answer before
    a 401/403, so authentication is split around it. Routing (404/405)
    happens after all of them, when Flask dispatches. One hook calling the
    steps, rather than one hook per step, also saves Flask's per-hook work
    on every request. A browser's CORS preflight is answered right after
    the general rate limit: it carries no key.
    """
    access_log.start_timer()
    headers.assign_request_id()
    auth.identify()
    ratelimit.check_rate_limits()
    preflight = cors.preflight_response()
    if preflight is not None:
        return preflight
    auth.enforce()
    payload.check_body_size()
    return None


def after_request(response):
    """Every response's headers, its encoding (last: it changes the body), its log line."""
    response = ratelimit.add_rate_limit_headers(response)
    response = headers.add_standard_headers(response)
    response = cors.add_cors_headers(response)
    response = compression.compress(response)
    return access_log.log_request(response)
