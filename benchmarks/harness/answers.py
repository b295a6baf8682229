"""Before any load: each reference must answer exactly what mapapi answers.

The floor is compared byte for byte, body and headers (all but those that
differ between any two requests: the request id, the bucket's remaining
count and reset time, the date and the server's name); the peer by its JSON
value, since it keeps no rate limit and so sends none of those headers.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from .scenarios import Scenario, headers_to_send
from .servers import DIRECT, Server
from .settings import progress

VOLATILE_HEADERS = {
    "x-request-id", "x-ratelimit-remaining", "x-ratelimit-reset", "date", "server",
    "connection", "keep-alive",
}


def fetch(server: Server, scenario: Scenario) -> tuple[int, dict, bytes]:
    request = scenario.requests[0]
    outgoing = urllib.request.Request(  # noqa: S310 - http://127.0.0.1 only
        server.base_url + request.path, method=request.method, headers=headers_to_send(scenario),
        data=request.body.encode() if request.body else None,
    )
    try:
        with DIRECT.open(outgoing, timeout=30) as response:
            status, headers, body = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, headers, body = error.code, error.headers, error.read()
    stable = {name.lower(): value for name, value in headers.items()
              if name.lower() not in VOLATILE_HEADERS}
    return status, stable, body


def check_same_answers(app: Server, references: dict[str, Server], scenarios) -> None:
    """Stop the benchmark when a reference's answer differs from mapapi's."""
    by_key = {scenario.key: scenario for scenario in scenarios}
    for scenario in scenarios:
        if scenario.server not in references:
            continue
        original = by_key[scenario.key.removeprefix(scenario.server + "_")]
        expected = fetch(app, original)
        got = fetch(references[scenario.server], scenario)
        if scenario.server == "floor":
            same = got == expected
        else:
            same = got[0] == expected[0] and json.loads(got[2]) == json.loads(expected[2])
        if not same:
            raise SystemExit(
                f"{scenario.label} does not answer what mapapi answers:\n"
                f"  mapapi: {expected[0]} {expected[1]}\n  {expected[2][:400]!r}\n"
                f"  {scenario.server}: {got[0]} {got[1]}\n  {got[2][:400]!r}"
            )
        progress(f"  {scenario.label}: the same answer as mapapi")
