"""Applying an update so that ``updatedAt`` moves only when something changed."""

from ..timeutil import utcnow


def apply_changes(resource, data: dict) -> bool:
    """Set the attributes in ``data`` that differ; stamp ``updated_at`` if any did."""
    changed = False
    for name, value in data.items():
        if getattr(resource, name) != value:
            setattr(resource, name, value)
            changed = True
    if changed:
        resource.updated_at = utcnow()
    return changed
