"""``/healthz``: whether the service can reach its database."""

from flask import Blueprint, jsonify
from sqlalchemy import text

from ..extensions import db

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    """Report whether the database answers (503 comes from errors.py)."""
    db.session.execute(text("SELECT 1"))
    return jsonify(data={"status": "ok"})
