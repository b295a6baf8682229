"""The plan: the file's rows compared with the map, and the writes that follow.

Rows are compared with the map's locations by ``externalId``: a new one is
created with every field the file gives, a changed one is sent with only
the fields that differ, an equal one is left alone. With ``prune``, the
locations whose ``externalId`` the file no longer has are deleted (a
location without one is never touched).

Writes are packed into requests of up to ``SYNC_MAX`` items whose body
stays within the service's 2 MiB, so 100,000 new rows of ordinary length
take exactly 100 upserts, the sync bucket's hour. Each request's
``Idempotency-Key`` is derived from the map's state the plan was made
against (the export's digest) and the request's body: a retry within a run
reuses it; a run after a crash reads the map again, so its plan, and its
keys, are new.
"""

import hashlib
import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

from ..config import MAX_BODY_BYTES
from ..contract.schemas import SYNC_MAX
from .current import Location, MapState, json_bytes
from .rows import BadRow, Row, Rows

#: Fields a row must give to create a location.
CREATE_NEEDS = ("name", "lat", "lng")
#: Fields that name other resources of the map, by the list that holds them.
REFERENCES = {"categoryId": "categories", "tagIds": "tags", "layerIds": "layers"}

_UPSERT_OPEN, _UPSERT_CLOSE = b'{"locations":[', b"]}"
_DELETE_OPEN, _DELETE_CLOSE = b'{"externalIds":[', b"]}"


class Write(NamedTuple):
    """A row to write: where it is, its externalId, the upsert item as JSON
    text, and what the plan shows of it (its name, or the fields that change)."""

    number: int
    external_id: str
    item: bytes
    shown: str
    creates: bool


class Delete(NamedTuple):
    external_id: str
    location: Location


@dataclass
class Plan:
    #: Rows to create or update, in file order.
    upserts: list[Write] = field(default_factory=list)
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deletes: list[Delete] = field(default_factory=list)
    #: Rows the contract or the map refuses.
    bad: list[BadRow] = field(default_factory=list)
    #: Ids of categories, tags and layers the writes name and no location of
    #: the map uses already, by field: each with the first row that names it.
    unknown_ids: dict[str, dict[str, int]] = field(
        default_factory=lambda: {name: {} for name in REFERENCES}
    )

    @property
    def writes(self) -> int:
        """Rows the plan writes: created, updated and deleted."""
        return len(self.upserts) + len(self.deletes)

    def first(self, creates: bool, limit: int) -> list[Write]:
        """The first ``limit`` rows to create (or to update)."""
        return list(itertools.islice((w for w in self.upserts if w.creates == creates), limit))


def make_plan(rows: Rows, state: MapState, *, prune: bool) -> Plan:
    """Every row of ``rows`` compared with the map's ``state``."""
    plan, seen = Plan(), {}
    for row in rows.rows:
        if isinstance(row, BadRow):
            plan.bad.append(row)
            continue
        first = seen.setdefault(row.external_id, row.number)
        if first != row.number:
            message = f"externalId: {row.external_id!r} is also on {rows.where(first)}"
            plan.bad.append(BadRow(row.number, [message]))
            continue
        location = state.by_external_id.get(row.external_id)
        if location is not None and not location.differs(row.fields):
            plan.unchanged += 1
            continue
        checked = rows.check(row)
        if isinstance(checked, BadRow):
            plan.bad.append(checked)
        elif location is None:
            _create(plan, checked, state)
        else:
            _update(plan, checked, location, state)
    if prune:
        plan.deletes = [
            Delete(external_id, location)
            for external_id, location in state.by_external_id.items()
            if external_id not in seen
        ]
    return plan


def _create(plan: Plan, row: Row, state: MapState) -> None:
    missing = [name for name in CREATE_NEEDS if name not in row.fields]
    if missing:
        plan.bad.append(BadRow(row.number, [
            f"{name}: required to create a location (no location of the map "
            f"has the externalId {row.external_id!r})" for name in missing
        ]))  # fmt: skip
        return
    _add(plan, row, row.fields, repr(row.fields["name"]), state, creates=True)
    plan.created += 1


def _update(plan: Plan, row: Row, location: Location, state: MapState) -> None:
    changed = location.differs(row.fields)
    if not changed:  # equal once checked
        plan.unchanged += 1
        return
    changes = {name: row.fields[name] for name in changed}
    _add(plan, row, changes, ", ".join(changed), state, creates=False)
    plan.updated += 1


def _add(plan: Plan, row: Row, fields: dict, shown: str, state: MapState, *, creates: bool) -> None:
    for name, unknown in plan.unknown_ids.items():
        value = fields.get(name)
        for one in value if isinstance(value, list) else [value]:
            if one is not None and one not in state.known_ids[name]:
                unknown.setdefault(one, row.number)
    item = json_bytes({"externalId": row.external_id, **fields})
    plan.upserts.append(Write(row.number, row.external_id, item, shown, creates))


class Batch(NamedTuple):
    """One write: its path below the map, its body, and the row numbers (or
    externalIds, for a delete) of its items in order."""

    path: str
    body: bytes
    items: list

    def idempotency_key(self, map_id: str, state: MapState) -> str:
        digest = hashlib.sha256(f"{state.digest}\n{map_id}\n{self.path}\n".encode())
        digest.update(self.body)
        return f"mapapi-sync-{digest.hexdigest()[:40]}"


def upsert_batches(plan: Plan, limit: int = SYNC_MAX, max_bytes: int = MAX_BODY_BYTES):
    """The upserts of the plan: up to ``limit`` items, bodies within ``max_bytes``."""
    encoded = ((write.number, write.item) for write in plan.upserts)
    yield from _packed("upsert", _UPSERT_OPEN, _UPSERT_CLOSE, encoded, limit, max_bytes)


def delete_batches(plan: Plan, limit: int = SYNC_MAX, max_bytes: int = MAX_BODY_BYTES):
    """The bulk deletes of the plan, by externalId."""
    encoded = ((d.external_id, json_bytes(d.external_id)) for d in plan.deletes)
    yield from _packed("bulk-delete", _DELETE_OPEN, _DELETE_CLOSE, encoded, limit, max_bytes)


def _packed(path: str, opening: bytes, closing: bytes, encoded, limit: int, max_bytes: int):
    parts, names, size = [], [], len(opening) + len(closing)
    for name, part in encoded:
        grown = size + len(part) + (1 if parts else 0)
        if parts and (len(parts) == limit or grown > max_bytes):
            yield Batch(path, opening + b",".join(parts) + closing, names)
            parts, names, grown = [], [], len(opening) + len(closing) + len(part)
        parts.append(part)
        names.append(name)
        size = grown
    if parts:
        yield Batch(path, opening + b",".join(parts) + closing, names)
