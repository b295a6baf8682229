"""The assistants and apps the caller's account connected with OAuth."""

from flask import Blueprint, g

from ..contract.openapi import operation
from ..contract.pagination import PageQuerySchema, list_schema, paginate
from ..contract.schemas import DeletedSchema, GrantSchema
from ..extensions import db
from ..http.payload import load_query, respond
from ..oauth.grants import listed_grants, revoke_grant

bp = Blueprint("grants", __name__)


@bp.get("/grants")
@operation(query=PageQuerySchema, response=list_schema("grants", GrantSchema))
def list_grants():
    """List the OAuth grants of the caller's account (revoked ones are not listed), oldest first."""
    return respond(paginate(listed_grants(g.account.id), load_query()))


@bp.delete("/grants/<grant_id>")
@operation(response=DeletedSchema)
def delete_grant(grant_id):
    """Revoke an OAuth grant with every token it issued: its client is cut off at once."""
    revoked = revoke_grant(grant_id, g.account.id)
    db.session.commit()
    return respond({"id": revoked.id, "deleted": True})
