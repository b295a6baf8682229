"""The scenarios: what wrk sends to which server, built from the seeded data."""

from __future__ import annotations

import json
import random
import signal
import string
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from .data import Seeded, SeededMap, location_properties
from .settings import API, BULK_SIZE, LOCATIONS_PER_MAP, PAGE_SIZE


@dataclass
class Request:
    method: str
    path: str
    body: str | None = None


#: In a header value: 43 letters drawn anew for each request (by lua/scenario.lua under wrk).
FRESH = "%RANDOM%"


@dataclass
class Scenario:
    """One row of the table: what wrk sends, to which server, and what must come back."""

    key: str
    label: str
    server: str  # "app", or a reference: "bare", "floor", "peer"
    requests: list[Request]
    headers: dict[str, str]
    expected_status: int = 200
    #: Locations each request creates (for the bulk-versus-single ratio).
    creates: int = 0
    #: The key of the scenario this one copies to another server, measured
    #: in turn with it in each run (``load.measure_in_turn``); empty for most.
    twin: str = ""
    #: A signal sent to the server before each measurement: the state a
    #: switchable twin serves this scenario in (``SWITCHES``).
    switch: signal.Signals | None = None


def headers_to_send(scenario: Scenario) -> dict[str, str]:
    """The scenario's headers for one request, with ``FRESH`` drawn."""
    return {
        name: value.replace(FRESH, "".join(random.choices(string.ascii_letters, k=43)))
        for name, value in scenario.headers.items()
    }


def location_item(rng: random.Random, writes: SeededMap, number: int) -> dict:
    """One location as the write scenarios send it: a category, 2 tags, properties."""
    name = f"Bench spot {number}"
    return {
        "name": name,
        "lat": round(rng.uniform(48.80, 48.90), 6),
        "lng": round(rng.uniform(2.25, 2.42), 6),
        "address": f"{number} Rue de Rivoli, Paris",
        "description": "Added by the benchmark.",
        "categoryId": rng.choice(writes.category_ids),
        "tagIds": rng.sample(writes.tag_ids, 2),
        "properties": location_properties(rng, name),
    }


def build_scenarios(seeded: Seeded) -> list[Scenario]:
    rng = random.Random(7)
    auth = {"Authorization": f"Bearer {seeded.secret}"}
    json_auth = {**auth, "Content-Type": "application/json"}
    rich, writes, big = seeded.rich, seeded.writes, seeded.big

    singles = [
        Request(
            "POST", f"{API}/maps/{writes.id}/locations", json.dumps(location_item(rng, writes, n))
        )
        for n in range(50)
    ]
    bulks = [
        Request(
            "POST",
            f"{API}/maps/{writes.id}/locations/bulk",
            json.dumps(
                {
                    "locations": [
                        location_item(rng, writes, batch * BULK_SIZE + n) for n in range(BULK_SIZE)
                    ]
                }
            ),
        )
        for batch in range(4)
    ]
    pool = writes.location_ids[:LOCATIONS_PER_MAP]
    sets = seeded.layer_sets
    memberships = [
        Request(
            "PUT",
            f"{API}/maps/{writes.id}/locations/{location_id}/layers",
            json.dumps({"layerIds": sets[(index + visit) % len(sets)]}),
        )
        for visit in range(4)
        for index, location_id in enumerate(pool)
    ]
    page = f"{API}/maps/{big.id}/locations?pageSize={PAGE_SIZE}&page="
    big_page = f"{API}/maps/{big.id}/locations?pageSize={PAGE_SIZE}&"
    lng, lat = seeded.big_point
    block = f"{lng - 0.0005:.6f},{lat - 0.0005:.6f},{lng + 0.0005:.6f},{lat + 0.0005:.6f}"
    a_minute_ago = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    filtered = [
        ("bbox", "big map, bbox of a city block", f"bbox={block}"),
        ("tag", "big map, one rare tag", f"tagId={seeded.rare_tag}"),
        ("updated", "big map, updatedSince a minute ago", f"updatedSince={a_minute_ago}"),
        ("q", "big map, q matching nothing", "q=zzzz"),
        # About one location in 500 (two house numbers, 17 and 117, on one of five
        # streets), made of the trigrams most of the map shares.
        ("q_address", "big map, q of an address (about 200)", "q=17%20Kastanienallee"),
    ]
    replayed = {**json_auth, "Idempotency-Key": "benchmark-replay"}
    return [
        Scenario("bare", "bare Flask view (limit)", "bare", [Request("GET", "/")], {}),
        Scenario(
            "get_map", "GET /maps/:id", "app", [Request("GET", f"{API}/maps/{rich.id}")], auth
        ),
        Scenario(
            "list_100",
            "GET locations pageSize=100",
            "app",
            [Request("GET", f"{API}/maps/{rich.id}/locations?pageSize={PAGE_SIZE}")],
            auth,
        ),
        Scenario("create", "POST location", "app", singles, json_auth, 201, creates=1),
        Scenario(
            "bulk", f"POST bulk of {BULK_SIZE}", "app", bulks, json_auth, 201, creates=BULK_SIZE
        ),
        Scenario("layers", "PUT location layers", "app", memberships, json_auth),
        Scenario("page_1", "big map page 1", "app", [Request("GET", page + "1")], auth),
        Scenario("page_1000", "big map page 1000", "app", [Request("GET", page + "1000")], auth),
        Scenario(
            "bad_key",
            "bad key (401)",
            "app",
            [Request("GET", f"{API}/maps/{rich.id}")],
            {"Authorization": "Bearer mk_live_" + "x" * 43},
            401,
        ),
        # Not a target: the same refusal for a key the server has never seen
        # (scenario.lua draws one per request), which it must look up; a key
        # refused once is remembered (mapapi/http/refused_keys.py).
        Scenario(
            "new_bad_key",
            "bad key, a new one each time (401)",
            "app",
            [Request("GET", f"{API}/maps/{rich.id}")],
            {"Authorization": f"Bearer mk_live_{FRESH}"},
            401,
        ),
        *[
            Scenario(f"filter_{key}", label, "app", [Request("GET", big_page + query)], auth)
            for key, label, query in filtered
        ],
        Scenario(
            "get_map_304",
            "GET /maps/:id, If-None-Match (304)",
            "app",
            [Request("GET", f"{API}/maps/{rich.id}")],
            {**auth, "If-None-Match": "*"},
            304,
        ),
        Scenario("replay", "POST location, replayed", "app", singles[:1], replayed, 201),
        Scenario(
            "list_100_gzip",
            "GET locations pageSize=100, gzip",
            "app",
            [Request("GET", f"{API}/maps/{rich.id}/locations?pageSize={PAGE_SIZE}")],
            {**auth, "Accept-Encoding": "gzip"},
        ),
        # Not a target: the floor of every API request, all of mapapi's
        # per-request work (hooks, rate limit, error body, headers, access log)
        # without the database.
        Scenario(
            "no_key",
            "no key (401, no SQL)",
            "app",
            [Request("GET", f"{API}/maps/{rich.id}")],
            {},
            401,
        ),
    ]


#: mapapi's scenarios that the floor and the peer serve too (the peer has no key check
#: worth comparing on its own: it answers the bad key as mapapi does, for the table).
REFERENCE_SCENARIOS = ("get_map", "list_100", "bad_key")


def reference_scenarios(scenarios: list[Scenario]) -> list[Scenario]:
    """The same requests, sent to the floor and to the peer."""
    return [
        scenario
        for server in ("floor", "peer")
        for scenario in sent_to(server, f"{server}: ", scenarios, REFERENCE_SCENARIOS)
    ]


#: What issue 22 compares: ``mapapi serve`` against the same app on plain waitress.
GUARDED_SCENARIOS = ("get_map", "list_100", "create", "bad_key")
#: What issue 16 compares: the steps of safe retries switched on and off
#: in one process, for requests that send neither Idempotency-Key nor a
#: precondition.
RETRY_SCENARIOS = ("get_map", "create")
#: The control: ``mapapi serve`` against a second ``mapapi serve``, the same
#: code in another process. How far apart two identical servers come out
#: is how finely a comparison of two processes can see.
CONTROL_SCENARIOS = RETRY_SCENARIOS
#: The servers of mapapi's own app that copies of mapapi's scenarios go to
#: (``references/<name>.py``): the label of their rows, and which scenarios.
TWINS = {
    "unguarded": ("plain waitress: ", GUARDED_SCENARIOS),
    "again": ("mapapi serve again: ", CONTROL_SCENARIOS),
}
#: What issue 32 compares: the per-request step of the metrics switched on
#: and off in one process that serves its metrics, for the cheapest
#: request (the refused key, where a fixed cost weighs most), a read and a write.
METRICS_SCENARIOS = ("get_map", "create", "bad_key")
#: The twins whose steps a signal switches (``references/<name>.py``): the
#: scenarios each serves, and its states: key prefix -> (label, signal).
SWITCHES = {
    "retry_switch": (
        RETRY_SCENARIOS,
        {
            "retries_on": ("retry steps on: ", signal.SIGUSR2),
            "retries_off": ("retry steps off: ", signal.SIGUSR1),
        },
    ),
    "metrics_switch": (
        METRICS_SCENARIOS,
        {
            "metrics_on": ("metrics on: ", signal.SIGUSR2),
            "metrics_off": ("metrics off: ", signal.SIGUSR1),
        },
    ),
}
TWIN_SERVERS = (*TWINS, *SWITCHES)


def twin_scenarios(scenarios: list[Scenario]) -> list[Scenario]:
    """The copies of mapapi's scenarios that its twins serve."""
    copies = [
        copy
        for server, (label, keys) in TWINS.items()
        for copy in twins(server, label, scenarios, keys)
    ]
    for server, (keys, states) in SWITCHES.items():
        for state, (label, switch) in states.items():
            copies += twins(server, label, scenarios, keys, state, switch)
    return copies


def twins(server, label, scenarios, keys, prefix="", switch=None) -> list[Scenario]:
    """Copies of mapapi's scenarios ``keys`` for ``server`` (keys prefixed
    with ``prefix``, by default the server's name), each measured in turn
    with mapapi serve's: a few per cent apart is the question, and a shared
    machine drifts by more than that within a run."""
    copies = sent_to(server, label, scenarios, keys, prefix)
    return [
        replace(copy, twin=key, switch=switch) for copy, key in zip(copies, keys, strict=True)
    ]


def sent_to(server: str, label: str, scenarios, keys, prefix: str = "") -> list[Scenario]:
    """Scenarios ``keys`` of mapapi's, sent to ``server`` under keys prefixed
    with ``prefix`` (by default the server's name)."""
    by_key = {scenario.key: scenario for scenario in scenarios}
    prefix = prefix or server
    return [
        replace(
            by_key[key], key=f"{prefix}_{key}", label=label + by_key[key].label, server=server
        )
        for key in keys
    ]


def statement_probes(seeded: Seeded, scenarios: list[Scenario]) -> list[Scenario]:
    """Extra requests whose counts show independence of page size and bulk size."""
    by_key = {scenario.key: scenario for scenario in scenarios}
    rich = seeded.rich
    one_item = json.loads(by_key["bulk"].requests[0].body)["locations"][:1]
    return [
        Scenario(
            "list_1",
            "GET locations pageSize=1",
            "app",
            [Request("GET", f"{API}/maps/{rich.id}/locations?pageSize=1")],
            by_key["list_100"].headers,
        ),
        Scenario(
            "bulk_1",
            "POST bulk of 1",
            "app",
            [
                Request(
                    "POST",
                    f"{API}/maps/{seeded.writes.id}/locations/bulk",
                    json.dumps({"locations": one_item}),
                )
            ],
            by_key["bulk"].headers,
            201,
            creates=1,
        ),
    ]


