"""The caller's own API keys."""

from flask import Blueprint, g

from ..contract.openapi import current_operation, operation
from ..contract.pagination import PageQuerySchema, list_schema, paginate
from ..contract.schemas import CreatedKeySchema, KeyInputSchema, KeySchema
from ..extensions import db
from ..http.payload import json_body, load_query, respond
from ..services.keys import bounded_expiry, issue_key, listed_keys, revoke_key

bp = Blueprint("keys", __name__)


@bp.get("/keys")
@operation(query=PageQuerySchema, response=list_schema("keys", KeySchema))
def list_keys():
    """List the caller's active and expired API keys, newest first."""
    return respond(paginate(listed_keys(g.account), load_query()))


@bp.post("/keys")
@operation(body=KeyInputSchema, response=CreatedKeySchema, status=201, conflict=True)
def create_key():
    """Create an API key; its secret is shown in this response only.

    A key that expires makes keys that expire no later than it does.
    """
    body = json_body()
    fields = current_operation().load(body)
    fields["expires_at"] = bounded_expiry(
        fields["expires_at"], "expiresAt" in body, g.account.key_expires_at
    )
    key = issue_key(g.account, **fields)
    db.session.commit()
    return respond(key)


@bp.delete("/keys/<key_id>")
@operation(response=KeySchema)
def delete_key(key_id):
    """Revoke an API key; requests with it are refused at once."""
    key = revoke_key(key_id, g.account)
    db.session.commit()
    return respond(key)
