"""The two request hooks: the steps every request and every response pass."""

from . import access_log, auth, headers, payload, ratelimit


def before_request() -> None:
    """Every request's checks, in the contract's order.

    The general rate limit needs to know the account but must answer before
    a 401/403, so authentication is split around it. Routing (404/405)
    happens after all of them, when Flask dispatches. One hook calling the
    steps, rather than one hook per step, also saves Flask's per-hook work
    on every request.
    """
    access_log.start_timer()
    headers.assign_request_id()
    auth.identify()
    ratelimit.check_rate_limits()
    auth.enforce()
    payload.check_body_size()


def after_request(response):
    """Every response's headers, then its access-log line."""
    response = ratelimit.add_rate_limit_headers(response)
    response = headers.add_standard_headers(response)
    return access_log.log_request(response)
