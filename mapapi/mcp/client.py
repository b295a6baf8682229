"""The HTTP side of the MCP server: calls to the mapapi service, retried safely.

Every POST carries an ``Idempotency-Key``; when an answer is lost (a reset
connection, a time-out) the same request is sent again with the same key, so
a create never happens twice. PUT and DELETE are idempotent by themselves
and are retried the same way. The key is only ever put in the
``Authorization`` header: no message built here contains it.
"""

import asyncio
import uuid

import httpx2

from .arguments import Request
from .server import Answer, ServiceUnreachable

#: Tries for a request whose answer was lost, and the pause between them.
ATTEMPTS = 3
PAUSE_SECONDS = 0.5
#: A request that takes longer counts as lost and is retried.
TIMEOUT_SECONDS = 30.0


class ServiceClient:
    """One mapapi service, reached with one key."""

    def __init__(self, base_url: str, key: str):
        self.base_url = base_url.rstrip("/")
        self._http = httpx2.AsyncClient(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {key}", "User-Agent": "mapapi-mcp"},
            timeout=TIMEOUT_SECONDS,
            follow_redirects=False,
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def openapi_document(self) -> dict:
        """The service's own description of its API (no key needed)."""
        answer = await self.request(Request("get", "/api/v1/openapi.json", [], None, None))
        if answer.status != 200 or not isinstance(answer.body, dict):
            raise ServiceUnreachable(
                f"{self.base_url} answered {answer.status} for its API description: "
                "is this a mapapi service?"
            )
        return answer.body

    async def request(self, request: Request) -> Answer:
        """One call, retried with the same idempotency key while its answer is lost."""
        headers = {}
        if request.method == "post":
            headers["Idempotency-Key"] = str(uuid.uuid4())
        if request.body is not None:
            headers["Content-Type"] = request.content_type
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = await self._http.request(
                    request.method.upper(),
                    request.path,
                    params=request.query or None,
                    json=request.body,
                    headers=headers,
                )
            except httpx2.TransportError as error:
                if attempt == ATTEMPTS:
                    raise ServiceUnreachable(
                        f"the mapapi service at {self.base_url} did not answer "
                        f"({type(error).__name__}); is it running?"
                    ) from None
                await asyncio.sleep(PAUSE_SECONDS)
                continue
            if (
                response.status_code == 409
                and _code(response) == "IDEMPOTENCY_KEY_IN_USE"
            ):
                # The lost first try is still running: its outcome comes next time.
                await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
                continue
            return Answer(response.status_code, response.headers, _json(response))
        raise ServiceUnreachable(
            f"the mapapi service at {self.base_url} kept the request running"
        )


def _json(response: httpx2.Response):
    try:
        return response.json()
    except ValueError:
        return None


def _code(response: httpx2.Response) -> str | None:
    body = _json(response)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"].get("code")
    return None
