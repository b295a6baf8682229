"""What a sync job sends (issue 23): a bulk create of 100 and an upsert of 100
whose items are all new, all changed or all unchanged.

Each request must stay what its mode says under load: "all new" needs
externalIds never sent before, "all changed" new values for items that
exist. So the bodies are made per request, for the load driver
(``sync_driver.py``), from an owner (one driver thread) and the number of
that owner's request: a thread's items are written by that thread only.

Where: the creating modes write into the main table's writes map (which
they grow by thousands of locations; creating does not depend on a map's
size). The modes that update a set of their own write into a map the main
table leaves alone, whose size stays known (its 500 locations and the
sets), and one of them again into the 100,000-location map, since finding
and answering existing locations may depend on the size of their map.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from .data import Seeded, SeededMap
from .scenarios import Request, Scenario, location_item
from .settings import API, BIG_MAP_LOCATIONS, BULK_SIZE


@dataclass(frozen=True)
class WriteMode:
    key: str
    label: str
    operation: str  # the last part of the path: "bulk" or "upsert"
    expected_status: int
    #: The answer's count that must equal the number of items sent.
    counted: str
    #: Every request brings externalIds never sent; otherwise each owner
    #: sends one set of its own, created by its first request.
    fresh_ids: bool = False
    #: Every request gives the owner's items new values (name and properties).
    changes: bool = False
    #: The map written into: an attribute of ``Seeded``.
    target: str = "writes"

    def map_in(self, seeded: Seeded) -> SeededMap:
        return getattr(seeded, self.target)

    def path(self, seeded: Seeded) -> str:
        return f"{API}/maps/{self.map_in(seeded).id}/locations/{self.operation}"

    def body(self, items: list[dict], stamp: str, owner: str, number: int) -> str:
        """The JSON body of ``owner``'s request ``number`` (0: its first, which
        creates the owner's set where the mode has one). ``stamp`` keeps the
        fresh externalIds of one measurement apart from another's; a set's
        are the same in every measurement."""
        sent = []
        for index, item in enumerate(items):
            name = f"{stamp}-{number}" if self.fresh_ids else "set"
            if self.changes:
                item = {
                    **item,
                    "name": f"{item['name']} {stamp} v{number}",
                    "properties": {**item["properties"], "version": f"{stamp}-{number}"},
                }
            sent.append({**item, "externalId": f"{self.key}-{owner}-{name}-{index}"})
        return json.dumps({"locations": sent})

    def answered_right(self, answer: dict, size: int) -> bool:
        return answer.get("data", {}).get(self.counted) == size


MODES = (
    WriteMode("sync_bulk", f"POST bulk of {BULK_SIZE}, new externalIds", "bulk", 201, "count",
              fresh_ids=True),
    WriteMode("upsert_new", f"upsert of {BULK_SIZE}, all new", "upsert", 200, "created",
              fresh_ids=True),
    WriteMode("upsert_changed", f"upsert of {BULK_SIZE}, all changed", "upsert", 200, "updated",
              changes=True, target="spare"),
    WriteMode("upsert_unchanged", f"upsert of {BULK_SIZE}, all unchanged", "upsert", 200,
              "unchanged", target="spare"),
    WriteMode("upsert_changed_big",
              f"upsert of {BULK_SIZE}, all changed, {BIG_MAP_LOCATIONS:,}-location map",
              "upsert", 200, "updated", changes=True, target="big"),
)  # fmt: skip


def auth_headers(seeded: Seeded) -> dict[str, str]:
    return {"Authorization": f"Bearer {seeded.secret}", "Content-Type": "application/json"}


def owner_items(seeded_map: SeededMap, owner: int) -> list[dict]:
    """The items an owner sends into ``seeded_map``, as the write scenarios make them."""
    rng = random.Random(owner)
    return [location_item(rng, seeded_map, owner * BULK_SIZE + n) for n in range(BULK_SIZE)]


def statement_scenarios(seeded: Seeded) -> list[Scenario]:
    """Each mode with 1 item and with 100, for ``count_statements``: its
    warm-up request is the owner's first (which creates its set), the counted
    one its second, which is what the mode says. Not in the big map, which
    the main table reads afterwards (the same statements as in the other)."""
    probes = []
    for mode in MODES:
        if mode.target == "big":
            continue
        items = owner_items(mode.map_in(seeded), owner=BULK_SIZE + 1)
        for size in (1, BULK_SIZE):
            bodies = [mode.body(items[:size], "sql", f"n{size}", number) for number in (0, 1)]
            probes.append(
                Scenario(
                    f"{mode.key}_{size}",
                    f"{mode.label} ({size} of them)",
                    "app",
                    [Request("POST", mode.path(seeded), body) for body in bodies],
                    auth_headers(seeded),
                    mode.expected_status,
                )
            )
    return probes
