"""The caller's own API keys."""

from flask import Blueprint, g, request

from ..extensions import db
from ..pagination import list_schema, paginate
from ..payload import load_body, respond
from ..schemas import CreatedKeySchema, KeyInputSchema, KeySchema
from ..services.keys import issue_key, listed_keys, revoke_key

bp = Blueprint("keys", __name__)

_input = KeyInputSchema()
_output = KeySchema()
_created = CreatedKeySchema()
_list = list_schema("keys", KeySchema)


@bp.get("/keys")
def list_keys():
    """List the caller's active and expired API keys, newest first."""
    return respond(_list, paginate(listed_keys(g.account), request.args))


@bp.post("/keys")
def create_key():
    """Create an API key; its secret is shown in this response only."""
    key = issue_key(g.account, **load_body(_input))
    db.session.commit()
    return respond(_created, key, 201)


@bp.delete("/keys/<key_id>")
def delete_key(key_id):
    """Revoke an API key; requests with it are refused at once."""
    key = revoke_key(key_id, g.account)
    db.session.commit()
    return respond(_output, key)
