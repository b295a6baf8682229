"""The contract's three rate-limit buckets, per account, on a moving window.

Flask-Limiter provides the configured storage (memory or Redis) and the
moving-window strategy; the buckets are checked here rather than by its
decorators because the contract needs an order they cannot express: the
general bucket before authentication, the map-creation and bulk buckets
after it, and a request refused by those uses up nothing — so the general
bucket is only tested first, and consumed once the route's bucket took the
request.
"""

import math
import time
from typing import NamedTuple

from flask import current_app, g, request
from limits import RateLimitItem, parse

from .auth import is_api_request
from .errors import APIError
from .extensions import limiter

#: Config key of each bucket's limit string.
BUCKET_SETTINGS = {
    "general": "RATELIMIT_GENERAL",
    "map-create": "RATELIMIT_MAP_CREATE",
    "bulk": "RATELIMIT_BULK",
}
#: The endpoints that also count against a bucket of their own.
ROUTE_BUCKETS = {
    "maps.create_map": "map-create",
    "locations.bulk_create_locations": "bulk",
}


class BucketState(NamedTuple):
    limit: int
    remaining: int
    reset: float


def init_app(app) -> None:
    """Bind Flask-Limiter and parse the configured limits once."""
    limiter.init_app(app)
    app.extensions["mapapi.buckets"] = {
        bucket: parse(app.config[setting]) for bucket, setting in BUCKET_SETTINGS.items()
    }


def check_rate_limits() -> None:
    """Count the request; raise RATE_LIMIT_EXCEEDED when a bucket is empty."""
    g.rate_limit_states = []
    if not is_api_request():
        return
    identity = f"account:{g.account.id}" if g.account is not None else f"address:{request.remote_addr}"
    route_bucket = ROUTE_BUCKETS.get(request.endpoint) if g.auth_error is None else None
    if route_bucket is None:
        _take("general", identity)
        return
    _test("general", identity)
    _take(route_bucket, identity)
    _take("general", identity)


def add_rate_limit_headers(response):
    """Describe the bucket with the fewest requests left; Retry-After on 429."""
    states = g.get("rate_limit_states")
    if not states:
        response.headers.pop("Retry-After", None)
        return response
    state = min(states, key=lambda s: s.remaining)
    response.headers["X-RateLimit-Limit"] = str(state.limit)
    response.headers["X-RateLimit-Remaining"] = str(state.remaining)
    response.headers["X-RateLimit-Reset"] = str(math.ceil(state.reset))
    if response.status_code == 429:
        response.headers["Retry-After"] = str(max(1, math.ceil(state.reset - time.time())))
    else:
        response.headers.pop("Retry-After", None)
    return response


def _item(bucket: str) -> RateLimitItem:
    return current_app.extensions["mapapi.buckets"][bucket]


def _test(bucket: str, identity: str) -> None:
    if not limiter.limiter.test(_item(bucket), identity, bucket):
        _refuse(bucket, identity)


def _take(bucket: str, identity: str) -> None:
    if not limiter.limiter.hit(_item(bucket), identity, bucket):
        _refuse(bucket, identity)
    _remember(bucket, identity)


def _remember(bucket: str, identity: str) -> BucketState:
    item = _item(bucket)
    reset, remaining = limiter.limiter.get_window_stats(item, identity, bucket)
    state = BucketState(item.amount, max(0, remaining), reset)
    g.rate_limit_states.append(state)
    return state


def _refuse(bucket: str, identity: str) -> None:
    _remember(bucket, identity)
    raise APIError(429, "RATE_LIMIT_EXCEEDED", f"Too many requests: the {bucket} limit is reached.")
