"""Response shapes shared by every resource's views."""

from ..payload import respond
from ..schemas import DeletedSchema

_deleted = DeletedSchema()


def respond_deleted(resource_id: str):
    """``{"data": {"id": ..., "deleted": true}}``."""
    return respond(_deleted, {"id": resource_id, "deleted": True})
