"""The floor: mapapi's reads written on the database driver alone, in a minimal Flask app.

It does every check mapapi makes for ``GET /maps/:id``, the page of
locations and a refused key, and nothing more: the key by its SHA-256 hash
with revocation, expiry, plan and scope, a key refused for good remembered
as mapapi remembers it; ``lastUsedAt`` written at most once a minute; the
general bucket counted on the same moving window (the ``limits`` engine on
the configured storage, as Flask-Limiter drives it); the map's ownership;
one snapshot per read; the same JSON, the same headers (checked byte for
byte against mapapi before the load) and one access-log line. It runs
under waitress with mapapi's settings.

Usage: ``python floor.py PORT THREADS DATABASE_URL`` (``sqlite:///path`` or
``postgresql+psycopg://...``); the limit and its storage come from
``MAPAPI_RATELIMIT_GENERAL`` and ``MAPAPI_RATELIMIT_STORAGE_URI``.
"""

import gzip
import hashlib
import json
import logging
import math
import os
import re
import secrets
import sqlite3
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import orjson
import waitress
from flask import Flask, Response, request
from limits import parse
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

API = "/api/v1"
LAST_USED_RESOLUTION = timedelta(minutes=1)
SEND_A_KEY = "`Authorization: Bearer <key>`"
GZIP_MIN_BYTES = int(os.environ.get("MAPAPI_GZIP_MIN_BYTES", "1024"))
DIGITS = re.compile(r"[0-9]+")

app = Flask("floor")
access_log = logging.getLogger("floor.access")
limit = parse(os.environ.get("MAPAPI_RATELIMIT_GENERAL", "1000 per hour"))
window = MovingWindowRateLimiter(
    storage_from_string(os.environ.get("MAPAPI_RATELIMIT_STORAGE_URI", "memory://"))
)


class Refusal(Exception):
    def __init__(self, status: int, code: str, message: str, headers=None):
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


# --- the database: one connection per worker thread --------------------------------------


class Database:
    """Connections per thread; ``?`` placeholders on SQLite, ``%s`` on PostgreSQL."""

    def __init__(self, url: str):
        self.url = url
        self.sqlite = url.startswith("sqlite")
        self.local = threading.local()

    def connection(self):
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = self.local.connection = self._connect()
        return connection

    def _connect(self):
        if self.sqlite:
            connection = sqlite3.connect(
                self.url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False
            )
            for pragma in ("journal_mode=WAL", "busy_timeout=5000", "synchronous=NORMAL",
                           "foreign_keys=ON"):
                connection.execute(f"PRAGMA {pragma}")
            return connection
        import psycopg

        return psycopg.connect(self.url.replace("postgresql+psycopg://", "postgresql://"))

    def sql(self, statement: str) -> str:
        return statement if self.sqlite else statement.replace("?", "%s")

    def read(self, work):
        """``work(execute)`` in one snapshot."""
        connection = self.connection()
        if self.sqlite:
            connection.execute("BEGIN")
        try:
            return work(lambda statement, *args: connection.execute(self.sql(statement), args))
        finally:
            connection.execute("COMMIT") if self.sqlite else connection.rollback()

    def write(self, statement: str, *args) -> None:
        connection = self.connection()
        if self.sqlite:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(statement, args)
            connection.execute("COMMIT")
        else:
            connection.execute(self.sql(statement), args)
            connection.commit()


database: Database


def moment(value) -> datetime | None:
    """A stored time as a naive UTC datetime (SQLite gives text)."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)


def timestamp(value) -> str | None:
    value = moment(value)
    return None if value is None else value.isoformat(timespec="milliseconds") + "Z"


# --- every request: the key, the bucket, the checks ------------------------------------------

KEY_BY_HASH = """
    SELECT k.pk, k.scope, k.expires_at, k.revoked_at, k.last_used_at,
           a.id, a.plan, a.plan_until
    FROM api_keys k JOIN accounts a ON a.id = k.account_id
    WHERE k.secret_hash = ?"""


INVALID_KEY = (
    "INVALID_API_KEY",
    (
        "The API key is not valid (malformed, unknown or revoked): "
        f"send a current key as {SEND_A_KEY}."
    ),
    'Bearer realm="mapapi", error="invalid_token"',
)
EXPIRED_KEY = (
    "API_KEY_EXPIRED",
    f"This API key has expired: send a current key as {SEND_A_KEY}.",
    'Bearer realm="mapapi", error="invalid_token"',
)
#: Keys refused for good (unknown, revoked, expired) -> (refusal, until), as mapapi keeps
#: them: at most 10,000, oldest dropped first, each for 5 minutes.
REFUSED: dict[str, tuple[tuple, float]] = {}
REFUSED_LOCK = threading.Lock()


def key_refusal(key, now: datetime):
    if key is None or key[3] is not None:
        return INVALID_KEY
    if key[2] is not None and moment(key[2]) <= now:
        return EXPIRED_KEY
    return None


def refuse_for_good(digest: str, failure: tuple) -> None:
    with REFUSED_LOCK:
        REFUSED.pop(digest, None)
        while len(REFUSED) >= 10_000:
            del REFUSED[next(iter(REFUSED))]
        REFUSED[digest] = (failure, time.monotonic() + 300.0)


def authenticate():
    """The account id of a valid key with the right plan and scope; else a Refusal.

    The general bucket is counted first, as mapapi does: the account's when
    the key is valid, else the client address's.
    """
    header = request.headers.get("Authorization", "").strip()
    scheme, _, token = header.partition(" ")
    now = datetime.now(UTC).replace(tzinfo=None)
    key = failure = None
    if not header:
        failure = ("MISSING_API_KEY", f"An API key is required: send it as {SEND_A_KEY}.",
                   'Bearer realm="mapapi"')
    elif scheme.lower() != "bearer" or not token.strip():
        failure = INVALID_KEY
    else:
        digest = hashlib.sha256(token.strip().encode("utf-8", "surrogatepass")).hexdigest()
        failure, until = REFUSED.get(digest, (None, 0.0))
        if failure is None or until <= time.monotonic():
            key = database.read(lambda execute: execute(KEY_BY_HASH, digest).fetchone())
            failure = key_refusal(key, now)
            if failure is not None:
                refuse_for_good(digest, failure)
    identity = f"account:{key[5]}" if failure is None else f"address:{request.remote_addr}"
    count(identity)
    if failure is not None:
        code, message, challenge = failure
        raise Refusal(401, code, message, {"WWW-Authenticate": challenge})
    last_used = moment(key[4])
    if last_used is None or now - last_used >= LAST_USED_RESOLUTION:
        database.write(
            "UPDATE api_keys SET last_used_at = ? WHERE pk = ? "
            "AND (last_used_at IS NULL OR last_used_at < ?)",
            now, key[0], now - LAST_USED_RESOLUTION,
        )
    plan_until = moment(key[7])
    if key[6] != "pro" or (plan_until is not None and plan_until <= now):
        raise Refusal(403, "PRO_SUBSCRIPTION_REQUIRED", "The API needs an active Pro plan.")
    if key[1] == "READ_ONLY" and request.method not in ("GET", "HEAD", "OPTIONS"):
        raise Refusal(403, "INSUFFICIENT_SCOPE", "This API key is read-only.")
    return key[5]


def count(identity: str) -> None:
    allowed = window.hit(limit, "floor", identity, "general")
    reset, remaining = window.get_window_stats(limit, "floor", identity, "general")
    request.environ["floor.limit"] = (limit.amount, max(0, remaining), reset)
    if not allowed:
        raise Refusal(429, "RATE_LIMIT_EXCEEDED", "Too many requests: the general limit is reached.",
                      {"Retry-After": str(max(1, math.ceil(reset - time.time())))})


def answer(status: int, body: bytes, headers=None) -> Response:
    if body and not body.endswith(b"\n"):
        body += b"\n"
    encoded = {}
    if len(body) >= GZIP_MIN_BYTES:  # mapapi's compression, at its level
        encoded["Vary"] = "Accept-Encoding"
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            body, encoded["Content-Encoding"] = gzip.compress(body, 3), "gzip"
    response = Response(body, status=status, content_type="application/json", headers=encoded)
    amount, remaining, reset = request.environ["floor.limit"]
    response.headers["X-RateLimit-Limit"] = str(amount)
    response.headers["X-RateLimit-Remaining"] = str(remaining)
    response.headers["X-RateLimit-Reset"] = str(math.ceil(reset))
    for name, value in (headers or {}).items():
        response.headers[name] = value
    response.headers["X-Request-Id"] = secrets.token_hex(16)
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def map_not_found() -> Refusal:
    return Refusal(404, "NOT_FOUND", "Map not found.")


@app.errorhandler(Refusal)
def refused(error: Refusal):
    body = orjson.dumps({"error": {"code": error.code, "message": error.message}})
    return answer(error.status, body, error.headers)


@app.after_request
def log_line(response):
    access_log.info(json.dumps({
        "method": request.method, "path": request.path, "status": response.status_code,
        "duration_ms": round((time.perf_counter() - request.environ["floor.started"]) * 1000, 2),
        "request_id": response.headers.get("X-Request-Id"), "client": request.remote_addr,
    }))
    return response


@app.before_request
def start_clock():
    request.environ["floor.started"] = time.perf_counter()


# --- the two reads ------------------------------------------------------------------------------

MAP = """
    SELECT id, created_at, title, slug, description, country, city, public, allow_cloning,
           style, center_lat, center_lng, zoom, account_id, updated_at
    FROM maps WHERE id = ? AND account_id = ?"""


def map_json(row) -> dict:
    return {
        "id": row[0], "createdAt": timestamp(row[1]), "title": row[2], "slug": row[3],
        "description": row[4], "country": row[5], "city": row[6], "public": bool(row[7]),
        "allowCloning": bool(row[8]), "style": row[9], "centerLat": row[10],
        "centerLng": row[11], "zoom": row[12], "userId": row[13], "updatedAt": timestamp(row[14]),
    }


@app.get(API + "/maps/<map_id>")
def get_map(map_id):
    account_id = authenticate()
    row = database.read(lambda execute: execute(MAP, map_id, account_id).fetchone())
    if row is None:
        raise map_not_found()
    body = orjson.dumps({"data": map_json(row)}) + b"\n"
    etag = hashlib.blake2b(body, digest_size=16).hexdigest()  # mapapi's strong ETag
    if request.if_none_match.contains_weak(etag):
        return answer(304, b"", {"ETag": f'"{etag}"'})
    return answer(200, body, {"ETag": f'"{etag}"'})


LOCATIONS = """
    SELECT id, created_at, map_id, updated_at, name, lat, lng, description, address,
           category_id, properties, external_id
    FROM locations WHERE map_id = ? ORDER BY pk LIMIT ? OFFSET ?"""
TAGS = """
    SELECT location_id, tag_id FROM location_tags WHERE location_id IN ({})
    ORDER BY location_id, position"""
LAYERS = """
    SELECT ll.location_id, l.id, l.created_at, l.map_id, l.updated_at, l.name, l.color,
           l.position, l.route_enabled, l.route_show_by_default
    FROM location_layers ll JOIN layers l ON l.id = ll.layer_id
    WHERE ll.location_id IN ({}) ORDER BY l.position"""


def page_number(name: str, default: int, most: int | None) -> int:
    text = request.args.get(name)
    if text is None:
        return default
    value = int(text) if DIGITS.fullmatch(text) and len(text) < 10 else 0
    if value < 1 or (most is not None and value > most):
        raise Refusal(400, "VALIDATION_ERROR", "The query is not valid.")
    return value


@app.get(API + "/maps/<map_id>/locations")
def list_locations(map_id):
    account_id = authenticate()
    page, size = page_number("page", 1, None), page_number("pageSize", 50, 100)

    def work(execute):
        if execute("SELECT 1 FROM maps WHERE id = ? AND account_id = ?", map_id, account_id
                   ).fetchone() is None:
            raise map_not_found()
        total = execute("SELECT count(*) FROM locations WHERE map_id = ?", map_id).fetchone()[0]
        rows = execute(LOCATIONS, map_id, size, (page - 1) * size).fetchall()
        ids = [row[0] for row in rows]
        marks = ", ".join("?" * len(ids))
        tags, layers = {}, {}
        if ids:
            for location_id, tag_id in execute(TAGS.format(marks), *ids):
                tags.setdefault(location_id, []).append(tag_id)
            for row in execute(LAYERS.format(marks), *ids):
                layers.setdefault(row[0], []).append(row[1:])
        return total, rows, tags, layers

    total, rows, tags, layers = database.read(work)
    locations = [
        {
            "id": row[0], "createdAt": timestamp(row[1]), "mapId": row[2],
            "updatedAt": timestamp(row[3]), "name": row[4], "lat": row[5], "lng": row[6],
            "description": row[7], "address": row[8], "categoryId": row[9],
            "properties": orjson.Fragment(row[10]) if isinstance(row[10], str) else row[10],
            "externalId": row[11],
            "tagIds": tags.get(row[0], []),
            "layers": [layer_json(layer) for layer in layers.get(row[0], [])],
        }
        for row in rows
    ]
    pagination = {"total": total, "page": page, "pageSize": size,
                  "totalPages": math.ceil(total / size)}
    return answer(200, orjson.dumps({"data": {"locations": locations, "pagination": pagination}}))


def layer_json(row) -> dict:
    return {
        "id": row[0], "createdAt": timestamp(row[1]), "mapId": row[2],
        "updatedAt": timestamp(row[3]), "name": row[4], "color": row[5], "order": row[6],
        "routeEnabled": bool(row[7]), "routeShowByDefault": bool(row[8]),
    }


if __name__ == "__main__":
    port, threads, url = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    database = Database(url)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    waitress.serve(app, host="127.0.0.1", port=port, threads=threads)
