"""``Idempotency-Key`` on every POST under the API: a retried request runs once.

The first request with a key reserves it: a row committed before the work
starts, unique per account and key, so that of two racing requests exactly
one runs. The work's own transaction is then held open (its ``commit()``
only flushes, see ``extensions.Session``) until the answer is known, and the
answer is written into the row in that same transaction: the work and its
kept answer are committed together, or neither is. A later request with
the key finds the answer and gets it again, or finds the request still
running (409), or finds the key used for another request (422).

Only the outcomes of requests that ran are kept: their 2xx answers and the
404 or 409 their data gave. A request refused before it ran (a 400 of its
body, query or headers, a 413, the 429 of its own bucket) and a 5xx free
the key, so that the client can fix the request and send it again with
the same key.

A process that dies while running a request leaves its row reserved with
no answer, and none of its work. After ``IDEMPOTENCY_LEASE_SECONDS`` such a
row is taken over by the next request with the key, which runs afresh. The
answer is written only by the request holding the row's current ``token``,
so a request that was merely slow, and lost its row, commits nothing.
"""

import hashlib
import json
import re
import secrets
import threading
import time
from datetime import timedelta
from typing import NamedTuple

from flask import current_app, g, request
from sqlalchemy import delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from werkzeug.exceptions import RequestEntityTooLarge

from ..extensions import db
from ..storage.models import IdempotencyRecord
from ..timeutil import utcnow
from .auth import is_api_request
from .errors import APIError, error_response, validation_error
from .payload import without_shown_once

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
_VALID_KEY = re.compile(r"[!-~]{1,255}")
#: The refusals kept beside the 2xx answers: NOT_FOUND and CONFLICT, which
#: the data gave (a request reserving a key has passed routing).
KEPT_REFUSALS = (404, 409)
#: How often, at most, one process deletes the rows past their time.
SWEEP_INTERVAL_SECONDS = 60

_records = IdempotencyRecord.__table__
_FIND = select(
    _records.c.pk,
    _records.c.fingerprint,
    _records.c.token,
    _records.c.started_at,
    _records.c.expires_at,
    _records.c.status,
    _records.c.body,
)


class Settings(NamedTuple):
    ttl: timedelta
    lease: timedelta


class Reservation(NamedTuple):
    """The key this request holds: its row and the token that proves it."""

    pk: int
    token: str


class Sweeper:
    """Deletes the expired rows, at most once a minute per process."""

    def __init__(self):
        self._lock = threading.Lock()
        self._next = 0.0

    def due(self) -> bool:
        with self._lock:
            if time.monotonic() < self._next:
                return False
            self._next = time.monotonic() + SWEEP_INTERVAL_SECONDS
            return True


def init_app(app) -> None:
    app.extensions["mapapi.idempotency"] = Settings(
        ttl=timedelta(hours=float(app.config["IDEMPOTENCY_TTL_HOURS"])),
        lease=timedelta(seconds=float(app.config["IDEMPOTENCY_LEASE_SECONDS"])),
    )
    app.extensions["mapapi.idempotency.sweeper"] = Sweeper()


def seen_before(current):
    """Check 5 of the request ``current``: the answer for a key already
    seen, or None to go on.

    The answer is a response to replay or an APIError (409, 422). When the
    key is new (or its row may be taken over), it is reserved for this
    request, and ``finish`` settles it once the answer is known.
    """
    if current.method != "POST":
        return None
    key = current.headers.get(HEADER)
    if key is None or not _VALID_KEY.fullmatch(key) or not _applies():
        return None
    fingerprint = _fingerprint()
    now = utcnow()
    settings = current_app.extensions["mapapi.idempotency"]
    # Two rounds at most: a row that appeared or changed between our
    # statements is read again once; then it is another request's.
    for _ in range(2):
        row = db.session.execute(_FIND.where(*_this_key(key))).one_or_none()
        if row is None:
            _sweep(now)
            if _insert(key, fingerprint, now, settings):
                return None
            continue
        if row.expires_at > now and row.fingerprint != fingerprint:
            return APIError(
                422,
                "IDEMPOTENCY_KEY_REUSED",
                "This Idempotency-Key was used with another method, path or body.",
            )
        if row.expires_at > now and row.status is not None:
            return _replay(row)
        if row.expires_at > now and now - row.started_at < settings.lease:
            return _in_use()
        # Expired, or left running by a process that died: take it over.
        if _take_over(row, fingerprint, now, settings):
            return None
    return _in_use()


def check_key_format(current) -> None:
    """A malformed ``Idempotency-Key`` is a field error of the request ``current`` (check 7)."""
    if current.method != "POST" or not is_api_request():
        return
    key = current.headers.get(HEADER)
    if key is not None and not _VALID_KEY.fullmatch(key):
        raise validation_error(
            "The Idempotency-Key header is invalid.",
            {HEADER: ["Must be 1 to 255 visible ASCII characters (! to ~)."]},
        )


def finish(response):
    """Keep the answer of the request holding a key, with its work; or free the key.

    Kept: the 2xx answers, and the 404 and 409 of a request that ran (it
    passed checks 1-6, so its 404 is an id of the path the data does not
    have, its 409 a conflict in the data). Any other answer, a refusal or a
    failure, frees the key for a retry, and no work is kept.
    """
    reservation = g.pop("idempotency", None)
    if reservation is None:
        return response
    session = db.session
    session.info.pop("commit_held", None)
    status = response.status_code
    try:
        if 200 <= status < 300 or status in KEPT_REFUSALS:
            if status >= 300:
                session.rollback()  # a refused request changes nothing
            if not _complete(reservation, status, _kept_body(response)):
                session.rollback()
                return error_response(_in_use())
        else:
            session.rollback()
            session.execute(delete(IdempotencyRecord).where(*_held(reservation)))
        session.commit()
    except Exception:
        session.rollback()
        _release_quietly(reservation)
        raise
    return response


def _applies() -> bool:
    """An authenticated POST to a known route of the API."""
    return (
        request.routing_exception is None
        and is_api_request()
        and g.get("account") is not None
        and g.get("auth_error") is None
    )


def _fingerprint() -> str:
    """SHA-256 of the method, the path, the query and the body's JSON value.

    Two bodies that parse to the same value (keys in another order, other
    spacing or escapes) are the same request; a body that is no JSON is
    compared byte for byte. Two queries with the same parameters and values
    in another order are the same query; a request without one is
    fingerprinted as before queries counted, so a key kept then still matches.
    """
    try:
        if (request.content_length or 0) > current_app.config["MAX_CONTENT_LENGTH"]:
            raise RequestEntityTooLarge()
        raw = request.get_data(cache=True)
    except RequestEntityTooLarge:
        body = b"too large"
    else:
        try:
            value = json.loads(raw.decode("utf-8"))
            body = (
                b"json "
                + json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
            )
        except (UnicodeDecodeError, ValueError, RecursionError):
            body = b"raw " + raw
    digest = hashlib.sha256(f"{request.method} {request.path}\n".encode())
    digest.update(body)
    if request.args:
        pairs = sorted(request.args.items(multi=True))
        digest.update(b"\nquery " + json.dumps(pairs, separators=(",", ":")).encode())
    return digest.hexdigest()


def _this_key(key: str):
    return _records.c.account_id == g.account.id, _records.c.key == key


def _held(reservation: Reservation):
    return _records.c.pk == reservation.pk, _records.c.token == reservation.token


def _insert(key: str, fingerprint: str, now, settings: Settings) -> bool:
    """Reserve a new key; False when another request's row is there already."""
    token = secrets.token_hex(16)
    values = {
        "account_id": g.account.id,
        "key": key,
        "fingerprint": fingerprint,
        "token": token,
        "started_at": now,
        "expires_at": now + settings.ttl,
    }
    dialect = postgresql if db.engine.dialect.name == "postgresql" else sqlite
    result = db.session.execute(
        dialect.insert(IdempotencyRecord)
        .values(values)
        .on_conflict_do_nothing()
        .returning(_records.c.pk)
    ).one_or_none()
    if result is None:
        return False
    _hold(Reservation(result.pk, token))
    return True


def _take_over(row, fingerprint: str, now, settings: Settings) -> bool:
    """Reserve a row that expired or whose request died, unless another request did."""
    token = secrets.token_hex(16)
    same_status = (
        _records.c.status.is_(None)
        if row.status is None
        else _records.c.status == row.status
    )
    taken = db.session.execute(
        update(IdempotencyRecord)
        .where(_records.c.pk == row.pk, _records.c.token == row.token, same_status)
        .values(
            fingerprint=fingerprint,
            token=token,
            started_at=now,
            expires_at=now + settings.ttl,
            status=None,
            body=None,
        )
    ).rowcount
    if not taken:
        return False
    _hold(Reservation(row.pk, token))
    return True


def _hold(reservation: Reservation) -> None:
    """Commit the reservation, then hold the work's commit until ``finish``."""
    db.session.commit()
    g.idempotency = reservation
    db.session.info["commit_held"] = True


def _sweep(now) -> None:
    if current_app.extensions["mapapi.idempotency.sweeper"].due():
        db.session.execute(
            delete(IdempotencyRecord).where(_records.c.expires_at <= now)
        )


def _complete(reservation: Reservation, status: int, body: str) -> bool:
    """Write the answer, if the row is still this request's."""
    now = utcnow()
    ttl = current_app.extensions["mapapi.idempotency"].ttl
    return bool(
        db.session.execute(
            update(IdempotencyRecord)
            .where(*_held(reservation))
            .values(status=status, body=body, expires_at=now + ttl)
        ).rowcount
    )


def _kept_body(response) -> str:
    """The answer's body as kept: without any secret shown once (a replay lacks it)."""
    return without_shown_once(response).decode("utf-8")


def _replay(row):
    response = current_app.response_class(
        row.body, status=row.status, mimetype="application/json"
    )
    response.headers[REPLAYED_HEADER] = "true"
    return response


def _in_use() -> APIError:
    return APIError(
        409,
        "IDEMPOTENCY_KEY_IN_USE",
        "A request with this Idempotency-Key is still running; retry shortly.",
        headers={"Retry-After": "1"},
    )


def _release_quietly(reservation: Reservation) -> None:
    """Free the key after a failure, if the database lets us; else the lease will."""
    try:
        db.session.execute(delete(IdempotencyRecord).where(*_held(reservation)))
        db.session.commit()
    except Exception:  # noqa: BLE001 - the original failure is the one to report
        db.session.rollback()
