"""Maps: the caller's maps and everything in them."""

from flask import Blueprint, g, request
from slugify import slugify
from sqlalchemy import delete, select

from ..extensions import db
from ..models import Map
from ..pagination import list_schema, paginate
from ..payload import load_body, respond
from ..schemas import MapInputSchema, MapSchema
from ..services.changes import apply_changes
from ..services.ownership import owned_map
from .responses import respond_deleted

bp = Blueprint("maps", __name__)

_input = MapInputSchema()
_output = MapSchema()
_list = list_schema("maps", MapSchema)


def slug_for(title: str) -> str:
    return slugify(title) or "map"


@bp.get("/maps")
def list_maps():
    """List the caller's maps."""
    statement = select(Map).where(Map.account_id == g.account.id).order_by(Map.pk)
    return respond(_list, paginate(statement, request.args))


@bp.post("/maps")
def create_map():
    """Create a map."""
    data = load_body(_input)
    map_ = Map(account_id=g.account.id, slug=slug_for(data["title"]), **data)
    db.session.add(map_)
    db.session.commit()
    return respond(_output, map_, 201)


@bp.get("/maps/<map_id>")
def get_map(map_id):
    """Get a map."""
    return respond(_output, owned_map(map_id))


@bp.put("/maps/<map_id>")
def update_map(map_id):
    """Update a map (fields left out keep their value)."""
    map_ = owned_map(map_id, lock=True)
    data = load_body(_input, partial=True)
    if "title" in data:
        data["slug"] = slug_for(data["title"])
    apply_changes(map_, data)
    db.session.commit()
    return respond(_output, map_)


@bp.delete("/maps/<map_id>")
def delete_map(map_id):
    """Delete a map and everything in it."""
    map_ = owned_map(map_id, lock=True)
    db.session.execute(delete(Map).where(Map.pk == map_.pk))
    db.session.commit()
    return respond_deleted(map_.id)
