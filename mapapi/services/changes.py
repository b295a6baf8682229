"""Applying an update so that ``updatedAt`` moves only when something changed."""

import json

from ..timeutil import utcnow
from . import journal


def same_value(old, new) -> bool:
    """Equal as the API would show them.

    Python holds ``True == 1`` and ``{"a": 1} == {"a": 1.0}``, but inside
    ``properties`` those are different JSON, so containers are compared as
    JSON text; a number field is stored as a float, so ``5`` equals ``5.0``.
    """
    if isinstance(old, (dict, list)) or isinstance(new, (dict, list)):
        return json.dumps(old) == json.dumps(new)
    return old == new and isinstance(old, bool) == isinstance(new, bool)


def apply_changes(resource, data: dict) -> bool:
    """Set the attributes in ``data`` that differ; stamp ``updated_at`` if any did."""
    changed = False
    for name, value in data.items():
        if not same_value(getattr(resource, name), value):
            setattr(resource, name, value)
            changed = True
    if changed:
        stamp(resource)
    return changed


def stamp(resource, now=None) -> None:
    """Move ORM object ``resource``'s ``updated_at``: it changed (and has its event)."""
    resource.updated_at = now or utcnow()
    journal.updated(resource)
