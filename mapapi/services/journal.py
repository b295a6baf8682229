"""The changes a transaction makes, written as events when it commits.

The services note each change where they make it: wherever an
``updated_at`` is stamped (``changes.stamp``, ``locations.touch_locations``,
the layer shifts) and wherever a resource is created or deleted. The notes
gather here, one per resource in the order first noted, and the session's
``before_commit`` turns them into events with one insert (``events.record``),
inside the transaction: the change and its events commit together or not at
all. A view has nothing to remember.

An event's ``data`` is the resource's GET body at commit, that is right
after the request's changes. Resources the services hold whole (just
created, or updated through the ORM) are dumped from what they hold;
those changed by a statement that touched many rows (a layer shift, the
locations of a deleted tag) are read back, one query per kind of resource.
"""

from dataclasses import dataclass

from flask import g
from sqlalchemy import event as sqlalchemy_event
from sqlalchemy import select

from ..contract.schemas import (
    CategorySchema,
    LayerSchema,
    LocationSchema,
    MapSchema,
    TagSchema,
)
from ..contract.serialization import compile_dumper
from ..extensions import db
from ..storage.models import Category, Layer, Location, Map, Tag
from . import events
from .location_reads import read_locations

KINDS = {Map: "map", Location: "location", Category: "category", Tag: "tag", Layer: "layer"}
_MODELS = {kind: model for model, kind in KINDS.items()}
_DUMP = {
    "map": compile_dumper(MapSchema()),
    "location": compile_dumper(LocationSchema()),
    "category": compile_dumper(CategorySchema()),
    "tag": compile_dumper(TagSchema()),
    "layer": compile_dumper(LayerSchema()),
}


@dataclass
class _Note:
    type: str
    map_id: str
    snapshot: object = None  # what to dump; None: read it back at commit
    dumped: bool = False  # the snapshot is the GET body already


def _notes() -> dict[tuple[str, str], _Note]:
    """This transaction's notes, by (kind, id), in the order first noted."""
    return db.session.info.setdefault("journal", {})


def created(kind: str, resource, map_id: str) -> None:
    """``resource`` (an object or a dict, as it is now final) was created."""
    _notes()[kind, _id_of(resource)] = _Note(f"{kind}.created", map_id, resource)


def updated(resource) -> None:
    """ORM object ``resource`` changed; it holds its new state."""
    kind = KINDS[type(resource)]
    _note_update(kind, resource.id, _map_of(resource), resource)


def updated_body(kind: str, body: dict, map_id: str) -> None:
    """The resource changed; ``body`` is its GET body now, read after the change."""
    note = _notes().setdefault((kind, body["id"]), _Note(f"{kind}.updated", map_id))
    note.snapshot, note.dumped = body, True


def touched(kind: str, ids, map_id: str) -> None:
    """The ``kind`` resources ``ids`` of map ``map_id`` were changed by a
    statement; their state is read back at commit."""
    for resource_id in ids:
        _note_update(kind, resource_id, map_id, None)


def deleted(kind: str, resource_id: str, map_id: str) -> None:
    """The resource was deleted. A map's deletion stands for everything in it."""
    notes = _notes()
    if kind == "map":
        for key in [key for key, note in notes.items() if note.map_id == map_id]:
            del notes[key]
    notes.pop((kind, resource_id), None)
    notes[kind, resource_id] = _Note(f"{kind}.deleted", map_id)


def _note_update(kind: str, resource_id: str, map_id: str, snapshot) -> None:
    note = _notes().get((kind, resource_id))
    if note is None:
        _notes()[kind, resource_id] = _Note(f"{kind}.updated", map_id, snapshot)
    elif note.snapshot is not snapshot:
        # Changed again, and not only through what the note holds: read it back.
        note.snapshot, note.dumped = None, False


def _id_of(resource) -> str:
    return resource["id"] if isinstance(resource, dict) else resource.id


def _map_of(resource) -> str:
    return resource.id if isinstance(resource, Map) else resource.map_id


def write_events(session) -> None:
    """Record the transaction's notes as events (``before_commit``)."""
    notes = session.info.pop("journal", None)
    if not notes:
        return
    session.flush()
    data = _read_back(notes)
    changes = []
    for (kind, resource_id), note in notes.items():
        if note.type.endswith(".deleted"):
            body = {"id": resource_id} if kind == "map" else {"id": resource_id, "mapId": note.map_id}
        elif note.dumped:
            body = note.snapshot
        elif note.snapshot is not None:
            body = _DUMP[kind](note.snapshot)
        else:
            body = data[kind, resource_id]
        changes.append((note.type, note.map_id, events.data_text(body)))
    events.record(g.account.id, changes)
    events.sweep_if_due()


def _read_back(notes: dict) -> dict[tuple[str, str], dict]:
    """The GET bodies, by (kind, id), of the noted resources with no snapshot."""
    wanted: dict[str, dict[str, str]] = {}
    for (kind, resource_id), note in notes.items():
        if note.snapshot is None and not note.type.endswith(".deleted"):
            wanted.setdefault(kind, {})[resource_id] = note.map_id
    found = {}
    for kind, ids in wanted.items():
        if kind == "location":
            for map_id in set(ids.values()):
                in_map = [i for i, m in ids.items() if m == map_id]
                found.update(
                    (("location", body["id"]), body) for body in read_locations(map_id, in_map)
                )
        else:
            model = _MODELS[kind]
            rows = db.session.scalars(
                select(model)
                .where(model.id.in_(list(ids)))
                .execution_options(populate_existing=True)
            )
            found.update(((kind, row.id), _DUMP[kind](row)) for row in rows)
    return found


def forget(session, *_args) -> None:
    """Drop the notes of a transaction that ended without committing them."""
    session.info.pop("journal", None)


def init_app(app) -> None:
    """Record events on every commit; refuse a retention that is no number of days."""
    days = app.config["EVENTS_RETENTION_DAYS"]
    try:
        valid = float(days) >= 0
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise ValueError(f"MAPAPI_EVENTS_RETENTION_DAYS must be a number of days, not {days!r}")
    if not sqlalchemy_event.contains(db.session, "before_commit", write_events):
        sqlalchemy_event.listen(db.session, "before_commit", write_events)
        sqlalchemy_event.listen(db.session, "after_soft_rollback", forget)
