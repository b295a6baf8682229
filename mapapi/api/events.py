"""The change feed: the account's events, read by cursor."""

from flask import Blueprint, g

from ..contract.openapi import operation
from ..contract.schemas import EventFeedSchema, EventQuerySchema
from ..http.payload import load_query, respond_dumped
from ..services.events import feed

bp = Blueprint("events", __name__)


@bp.get("/events")
@operation(query=EventQuerySchema, response=EventFeedSchema, errors=(410,))
def list_events():
    """Read the account's change feed, oldest first, after the cursor `after`.

    Pass `next` back as `after` to read on: no event is ever skipped.
    `after=latest` answers no events and the cursor of the newest one.
    """
    query = load_query()
    return respond_dumped(feed(g.account.id, **query))
