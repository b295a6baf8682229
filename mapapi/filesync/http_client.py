"""The mapapi service, reached with one key: requests retried safely.

Every POST carries the ``Idempotency-Key`` it is given, so a retry never
writes twice. An answer lost on the way (a reset connection, a time-out)
and a 5xx are retried with backoff, ``RETRIES`` times; a 429 is waited out
for its ``Retry-After`` and sent again, however often; a key whose first
request is still running (``409 IDEMPOTENCY_KEY_IN_USE``) is asked again
after its ``Retry-After``. The key is only ever put in the
``Authorization`` header: no message built here contains it.
"""

import re
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

import httpx2
import orjson

from ..config import RATE_LIMIT_BUCKETS

API_PREFIX = "/api/v1"
RETRIES = 5
#: Seconds before each retry of a lost answer or a 5xx.
BACKOFF_SECONDS = (1, 2, 4, 8, 16)
#: How long an answer may take: an upsert of 1000 locations takes a second or two.
TIMEOUT = httpx2.Timeout(120.0, connect=10.0)
T = TypeVar("T")
#: A 429's message: the bucket that refused, and its window.
_REFUSING_BUCKET = re.compile(r"the (\w+) limit \(([^)]*)\)")


class ServiceError(Exception):
    """The service refused a request or could not be reached: one line for the user.

    ``status``, ``code`` and ``details`` are the refusal's (0 and None when
    there was no answer)."""

    def __init__(self, message: str, status: int = 0, code: str | None = None, details=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.details = details


class Wait(NamedTuple):
    """A pause the client takes before sending a request again, and why."""

    seconds: float
    reason: str


class Service:
    """One mapapi service, reached with one key. ``on_wait`` is told of every pause."""

    def __init__(self, base_url: str, key: str, on_wait: Callable[[Wait], None]):
        self.base_url = base_url.rstrip("/")
        self.on_wait = on_wait
        #: Requests sent, retries included.
        self.sent = 0
        self._http = httpx2.Client(
            base_url=self.base_url + API_PREFIX,
            headers={"Authorization": f"Bearer {key}", "User-Agent": "mapapi-sync"},
            timeout=TIMEOUT,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def get(self, path: str, params: dict | None = None) -> dict:
        """The ``data`` of a GET."""
        return self._call(
            "GET", path, lambda: self._http.request("GET", path, params=params), _data
        )

    def post(self, path: str, body: bytes, idempotency_key: str) -> dict:
        """The ``data`` of a POST of the JSON ``body``, sent with ``idempotency_key``."""
        headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key}
        return self._call(
            "POST",
            path,
            lambda: self._http.request("POST", path, content=body, headers=headers),
            _data,
        )

    def stream(self, path: str, consume: Callable[[Iterator[bytes]], T]) -> T:
        """``consume(chunks)`` of a GET's body as it arrives; a stream cut
        short is read again from its start, with a fresh ``consume``."""

        def send():
            request = self._http.build_request("GET", path)
            return self._http.send(request, stream=True)

        def read(response):
            try:
                return consume(response.iter_bytes())
            finally:
                response.close()

        return self._call("GET", path, send, read)

    def _call(self, method: str, path: str, send: Callable, read: Callable):
        """``read(response)`` of the first answer that is no reason to retry."""
        failures = 0
        while True:
            self.sent += 1
            try:
                response = send()
                if response.status_code < 400:
                    return read(response)
                response.read()
            except httpx2.TransportError as error:
                failures += 1
                self._retry_or_fail(failures, f"{type(error).__name__}", method, path)
                continue
            status = response.status_code
            if status == 429:
                seconds = _retry_after(response, 60)
                reason = f"rate limited (429), Retry-After {seconds:.0f} s{_bucket(response)}"
                self.on_wait(Wait(seconds, reason))
                time.sleep(seconds)
            elif status == 409 and _error(response)[0] == "IDEMPOTENCY_KEY_IN_USE":
                seconds = _retry_after(response, 1)
                self.on_wait(Wait(seconds, "the same request is still running on the service"))
                time.sleep(seconds)
            elif status >= 500:
                failures += 1
                self._retry_or_fail(failures, f"{status} {_error(response)[0]}", method, path)
            else:
                raise _refusal(method, path, response)

    def _retry_or_fail(self, failures: int, what: str, method: str, path: str) -> None:
        if failures > RETRIES:
            raise ServiceError(
                f"{method} {self.base_url}{API_PREFIX}{path} failed {failures} times ({what}); "
                "is the service running? Run the command again to finish the job."
            )
        seconds = BACKOFF_SECONDS[failures - 1]
        self.on_wait(Wait(seconds, f"{what}: retry {failures} of {RETRIES}"))
        time.sleep(seconds)


def _data(response: httpx2.Response):
    body = _json(response)
    if not isinstance(body, dict) or "data" not in body:
        raise ServiceError(
            f"the service answered {response.status_code} without data: is it mapapi?"
        )
    return body["data"]


def _json(response: httpx2.Response):
    try:
        return orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return None


def _error(response: httpx2.Response) -> tuple[str | None, str, object]:
    """``(code, message, details)`` of an error answer."""
    body = _json(response)
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, response.reason_phrase, None
    return error.get("code"), str(error.get("message", "")), error.get("details")


def _refusal(method: str, path: str, response: httpx2.Response) -> ServiceError:
    code, message, details = _error(response)
    return ServiceError(
        f"{method} {API_PREFIX}{path}: {response.status_code} {code}: {message}",
        response.status_code,
        code,
        details,
    )


def _bucket(response: httpx2.Response) -> str:
    """What a 429 says of the bucket that refused it, and the setting that sizes it."""
    found = _REFUSING_BUCKET.search(_error(response)[1])
    if found is None:
        return ""
    bucket, window = found.groups()
    setting = RATE_LIMIT_BUCKETS.get(bucket)
    sized = f"; {setting} sets it" if setting else ""
    return f": the {bucket} bucket ({window}) is empty{sized}"


def _retry_after(response: httpx2.Response, default: float) -> float:
    try:
        return max(1.0, float(response.headers.get("Retry-After", default)))
    except ValueError:
        return default
