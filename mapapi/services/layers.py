"""Layer order: a map's layers always hold exactly the positions 0..n-1.

Every change takes the map's lock first (``owned_map``), so
two requests reordering the same map's layers run one after the other, and
reads the positions only under that lock.
"""

from sqlalchemy import func, select, update

from ..extensions import db
from ..models import Layer, Location, Map, location_layers
from ..timeutil import utcnow
from .changes import apply_changes
from .locations import touch_locations


def layer_count(map_: Map) -> int:
    return db.session.scalar(select(func.count()).where(Layer.map_id == map_.id))


def add_layer(map_: Map, data: dict) -> Layer:
    """Append, or insert at ``order`` (clamped to n) shifting the rest down."""
    count = layer_count(map_)
    position = min(data.pop("order", count), count)
    now = utcnow()
    _shift(map_, Layer.position >= position, +1, now)
    layer = Layer(map_id=map_.id, position=position, created_at=now, updated_at=now, **data)
    db.session.add(layer)
    db.session.flush()
    return layer


def move_layer(map_: Map, layer: Layer, order: int, now) -> bool:
    """Move ``layer`` to ``order`` (clamped to n-1), shifting the ones between."""
    target = min(order, layer_count(map_) - 1)
    current = layer.position
    if target == current:
        return False
    if target < current:
        _shift(map_, Layer.position.between(target, current - 1), +1, now)
    else:
        _shift(map_, Layer.position.between(current + 1, target), -1, now)
    layer.position = target
    layer.updated_at = now
    return True


def remove_layer(map_: Map, layer: Layer) -> None:
    """Delete ``layer``, take it off its locations and close the gap."""
    members = select(location_layers.c.location_id).where(location_layers.c.layer_id == layer.id)
    touch_locations(Location.id.in_(members))
    db.session.delete(layer)
    db.session.flush()
    _shift(map_, Layer.position > layer.position, -1, utcnow())


def _shift(map_: Map, which, step: int, now) -> None:
    db.session.execute(
        update(Layer)
        .where(Layer.map_id == map_.id, which)
        .values(position=Layer.position + step, updated_at=now)
        .execution_options(synchronize_session=False)
    )


def apply_layer_update(map_: Map, layer: Layer, data: dict) -> None:
    """Apply a partial update; ``order`` moves the layer among its siblings."""
    order = data.pop("order", None)
    apply_changes(layer, data)
    if order is not None:
        move_layer(map_, layer, order, utcnow())
