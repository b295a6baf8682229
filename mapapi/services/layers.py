"""Layer order: a map's layers always hold exactly the positions 0..n-1.

Every change takes the map's lock first (``owned_map``), so
two requests reordering the same map's layers run one after the other, and
reads the positions only under that lock.

A location's GET embeds its layers whole, so a layer that changes in any
way (its fields, or its order shifted by another layer) changes the
locations on it too, and their ``updatedAt`` moves with the layer's.
"""

from operator import itemgetter

from sqlalchemy import func, select, update

from ..extensions import db
from ..storage.models import Layer, Location, Map, location_layers, new_id
from ..timeutil import utcnow
from . import journal
from .changes import apply_changes, stamp
from .locations import touch_locations

_layers = Layer.__table__


def layer_count(map_: Map) -> int:
    return db.session.scalar(select(func.count()).where(Layer.map_id == map_.id))


def add_layer(map_: Map, data: dict) -> Layer:
    """Append, or insert at ``order`` (clamped to n) shifting the rest down."""
    count = layer_count(map_)
    position = min(data.pop("order", count), count)
    now = utcnow()
    layer = Layer(
        id=new_id(), map_id=map_.id, position=position, created_at=now, updated_at=now, **data
    )
    journal.created("layer", layer, map_.id)  # its events first, then the shifted ones'
    _shift(map_, _layers.c.position >= position, +1, now)
    db.session.add(layer)
    db.session.flush()
    return layer


def move_layer(map_: Map, layer: Layer, order: int, now) -> bool:
    """Move ``layer`` to ``order`` (clamped to n-1), shifting the ones between."""
    target = min(order, layer_count(map_) - 1)
    current = layer.position
    if target == current:
        return False
    stamp(layer, now)
    if target < current:
        _shift(map_, _layers.c.position.between(target, current - 1), +1, now)
    else:
        _shift(map_, _layers.c.position.between(current + 1, target), -1, now)
    layer.position = target
    return True


def remove_layer(map_: Map, layer: Layer) -> None:
    """Delete ``layer``, take it off its locations and close the gap."""
    now = utcnow()
    journal.deleted("layer", layer.id, map_.id)
    touch_locations(_locations_on(layer.id), map_.id, now)
    db.session.delete(layer)
    db.session.flush()
    _shift(map_, _layers.c.position > layer.position, -1, now)


def _shift(map_: Map, which, step: int, now) -> None:
    """Move the layers of ``map_`` matching ``which`` by ``step``; they and
    their locations change."""
    shifted = db.session.execute(
        update(_layers)
        .where(_layers.c.map_id == map_.id, which)
        .values(position=_layers.c.position + step, updated_at=now)
        .returning(_layers.c.position, _layers.c.id)
    ).all()
    if shifted:
        ids = [row.id for row in sorted(shifted, key=_by_position)]
        journal.touched("layer", ids, map_.id)
        touch_locations(_locations_on(*ids), map_.id, now)


_by_position = itemgetter(0)


def apply_layer_update(map_: Map, layer: Layer, data: dict) -> None:
    """Apply a partial update; ``order`` moves the layer among its siblings."""
    order = data.pop("order", None)
    changed = apply_changes(layer, data)
    if order is not None:
        changed = move_layer(map_, layer, order, utcnow()) or changed
    if changed:
        touch_locations(_locations_on(layer.id), map_.id, layer.updated_at)


def _locations_on(*layer_ids: str):
    """Locations on any of the layers ``layer_ids``: a condition for ``touch_locations``."""
    return Location.id.in_(
        select(location_layers.c.location_id).where(location_layers.c.layer_id.in_(layer_ids))
    )
