"""The contract's four rate-limit buckets, per account, on a moving window.

Flask-Limiter provides the configured storage (memory or Redis) and the
moving-window strategy; the buckets are checked here rather than by its
decorators because the contract needs an order they cannot express: the
general bucket before authentication, the map-creation, bulk and sync
buckets after it, and a request refused by those uses up nothing — so the general
bucket is only tested first, and consumed once the route's bucket took the
request.
"""

import logging
import math
import threading
import time
from typing import NamedTuple

from flask import current_app, g, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from limits import RateLimitItem, parse
from limits.errors import StorageError
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter, RateLimiter

from ..contract.geojson import asks_upsert
from ..metrics import RATE_LIMITED, start_at_zero
from .auth import is_api_request
from .errors import APIError
from .memory_window import SteadyMemoryStorage

log = logging.getLogger(__name__)

# Flask-Limiter supplies the configured storage and moving-window strategy;
# the buckets below are checked with it, passing each bucket's key
# explicitly, so this key function is only Flask-Limiter's default.
limiter = Limiter(key_func=get_remote_address)

#: Config key of each bucket's limit string.
BUCKET_SETTINGS = {
    "general": "RATELIMIT_GENERAL",
    "map-create": "RATELIMIT_MAP_CREATE",
    "bulk": "RATELIMIT_BULK",
    "sync": "RATELIMIT_SYNC",
}
#: Each bucket's name where a client reads it (``GET /rate-limits``, a 429's message).
PUBLIC_NAMES = {"general": "general", "map-create": "mapCreation", "bulk": "bulk", "sync": "sync"}
#: Answers what the account has left, and counts against none of its buckets.
UNCOUNTED_ENDPOINT = "limits.get_rate_limits"
#: The endpoints that also count against a bucket of their own.
ROUTE_BUCKETS = {
    "maps.create_map": "map-create",
    "locations.bulk_create_locations": "bulk",
    "locations.import_geojson": "bulk",
    "locations.upsert_locations": "sync",
    "locations.bulk_delete_locations": "sync",
}
#: Endpoints whose query can make them an upsert, which counts in the sync
#: bucket (``.../import?upsert=true``); read as the view reads its query.
UPSERT_QUERIES = {"locations.import_geojson": asks_upsert}


class BucketState(NamedTuple):
    limit: int
    remaining: int
    reset: float


class FailoverLimiter:
    """The configured storage, or per-process memory while it is unreachable.

    When Redis stops answering, every process keeps serving with limits of
    its own (logged once), tries Redis again every few seconds, and goes
    back to it as soon as it answers.
    """

    def __init__(self, primary: RateLimiter, retry_seconds: float):
        self.primary = primary
        self.retry_seconds = retry_seconds
        self.fallback = MovingWindowRateLimiter(SteadyMemoryStorage())
        self.down = False
        self.retry_at = 0.0
        self._lock = threading.Lock()

    def call(self, method: str, *args):
        if self._should_try_primary():
            try:
                result = getattr(self.primary, method)(*args)
            except StorageError as error:
                self._mark_down(error)
            else:
                self._mark_up()
                return result
        return getattr(self.fallback, method)(*args)

    def _should_try_primary(self) -> bool:
        if not self.down:
            return True
        with self._lock:
            if time.monotonic() < self.retry_at:
                return False
            self.retry_at = time.monotonic() + self.retry_seconds
            return True

    def _mark_down(self, error: StorageError) -> None:
        with self._lock:
            self.retry_at = time.monotonic() + self.retry_seconds
            if not self.down:
                self.down = True
                log.warning(
                    "rate-limit storage unreachable, counting per process until it returns: %s",
                    error,
                )

    def _mark_up(self) -> None:
        if self.down:
            with self._lock:
                if self.down:
                    self.down = False
                    log.warning("rate-limit storage reachable again")


class Buckets:
    """The parsed limits of one app and where they are counted."""

    def __init__(self, app):
        self.items = {
            bucket: parse(app.config[setting]) for bucket, setting in BUCKET_SETTINGS.items()
        }
        self.prefix = app.config["RATELIMIT_KEY_PREFIX"]
        primary = limiter.limiter
        if isinstance(limiter.storage, MemoryStorage):  # counted in this process
            primary = type(primary)(SteadyMemoryStorage())
        self.limiter = FailoverLimiter(
            primary, float(app.config["RATELIMIT_STORAGE_RETRY_SECONDS"])
        )

    def identifiers(self, bucket: str, identity: str) -> tuple[RateLimitItem, str, str, str]:
        return self.items[bucket], self.prefix, identity, bucket

    def hit(self, bucket: str, identity: str) -> bool:
        return self.limiter.call("hit", *self.identifiers(bucket, identity))

    def test(self, bucket: str, identity: str) -> bool:
        return self.limiter.call("test", *self.identifiers(bucket, identity))

    def state(self, bucket: str, identity: str) -> BucketState:
        reset, remaining = self.limiter.call(
            "get_window_stats", *self.identifiers(bucket, identity)
        )
        return BucketState(self.items[bucket].amount, max(0, remaining), reset)


def init_app(app) -> None:
    """Bind Flask-Limiter (storage, strategy) and parse the configured limits once.

    Flask-Limiter also registers request hooks of its own, which evaluate
    the limits of its decorators and its default limits: mapapi has neither,
    so they would only cost every request its time (7% of a
    ``GET /maps/:id``, by the benchmark's profile). They are taken off again.
    """
    hooks = _request_hooks(app)
    before = {name: list(funcs) for name, funcs in hooks.items()}
    limiter.init_app(app)
    for name, funcs in hooks.items():
        funcs[:] = [func for func in funcs if func in before[name]]
    app.extensions["mapapi.buckets"] = Buckets(app)
    start_at_zero(RATE_LIMITED, BUCKET_SETTINGS)


def _request_hooks(app) -> dict[str, list]:
    """The app-wide request hook lists, by kind."""
    return {
        "before": app.before_request_funcs.setdefault(None, []),
        "after": app.after_request_funcs.setdefault(None, []),
        "teardown": app.teardown_request_funcs.setdefault(None, []),
    }


def check_general_limit() -> None:
    """Check 1: count the request in the general bucket, or raise RATE_LIMIT_EXCEEDED.

    A request that a bucket of its route may still refuse (check 6) is only
    tested here, and counted by ``check_route_limit``: a 429 uses up nothing.
    """
    g.rate_limit_states = []
    if not is_api_request():
        return
    if request.endpoint == UNCOUNTED_ENDPOINT and g.get("account") is not None:
        g.rate_limit_states.append(_buckets().state("general", _identity()))
        return
    if _route_bucket() is None:
        _take("general", _identity())
    else:
        _test("general", _identity())


def check_route_limit(*, answered: bool = False) -> None:
    """Check 6: the map-creation, bulk or sync bucket, then the general count left pending.

    ``answered``: check 5 already answers the request (an Idempotency-Key
    seen before), which counts against the general bucket only.
    """
    bucket = _route_bucket()
    if bucket is None:
        return
    identity = _identity()
    if not answered:
        _take(bucket, identity)
    _take("general", identity)


def count_in_general_bucket() -> None:
    """Check 1 for a request outside the API that answers as the API does
    (``/mcp`` refusing a key): count it in its caller's general bucket, or
    raise RATE_LIMIT_EXCEEDED."""
    _take("general", _identity())


def _route_bucket() -> str | None:
    """The bucket of the request's route besides the general one, if any."""
    if g.get("auth_error") is not None or not is_api_request():
        return None
    upsert = UPSERT_QUERIES.get(request.endpoint)
    if upsert is not None and upsert(request.args):
        return "sync"
    return ROUTE_BUCKETS.get(request.endpoint)


def bucket_report(identity: str) -> dict:
    """Every bucket of ``identity`` as it stands, by its public name, counting
    nothing: limit, remaining, reset (Unix seconds; now when full) and window."""
    buckets, now = _buckets(), math.ceil(time.time())
    report = {}
    for bucket, setting in BUCKET_SETTINGS.items():
        state = buckets.state(bucket, identity)
        full = state.remaining >= state.limit
        report[PUBLIC_NAMES[bucket]] = {
            "limit": state.limit,
            "remaining": state.remaining,
            "reset": now if full else math.ceil(state.reset),
            "window": current_app.config[setting],
        }
    return report


def add_rate_limit_headers(response):
    """Describe the bucket with the fewest requests left; Retry-After on 429."""
    states = g.get("rate_limit_states")
    if not is_api_request() and not states:
        return response
    if not states:
        # Refused before any bucket counted it (the database was down, say):
        # describe the client address's bucket without counting.
        states = [_buckets().state("general", _identity())]
    state = min(states, key=lambda s: s.remaining)
    response.headers["X-RateLimit-Limit"] = str(state.limit)
    response.headers["X-RateLimit-Remaining"] = str(state.remaining)
    response.headers["X-RateLimit-Reset"] = str(math.ceil(state.reset))
    if response.status_code == 429:
        response.headers["Retry-After"] = str(max(1, math.ceil(state.reset - time.time())))
    return response


def _buckets() -> Buckets:
    return current_app.extensions["mapapi.buckets"]


def _identity() -> str:
    account = g.get("account")
    return f"account:{account.id}" if account is not None else f"address:{request.remote_addr}"


def _test(bucket: str, identity: str) -> None:
    if not _buckets().test(bucket, identity):
        _refuse(bucket, identity)


def _take(bucket: str, identity: str) -> None:
    buckets = _buckets()
    if not buckets.hit(bucket, identity):
        _refuse(bucket, identity)
    g.rate_limit_states.append(buckets.state(bucket, identity))


def _refuse(bucket: str, identity: str) -> None:
    g.rate_limit_states.append(_buckets().state(bucket, identity))
    RATE_LIMITED.labels(bucket).inc()
    window = current_app.config[BUCKET_SETTINGS[bucket]]
    raise APIError(
        429,
        "RATE_LIMIT_EXCEEDED",
        f"Too many requests: the {PUBLIC_NAMES[bucket]} limit ({window}) is reached.",
    )
