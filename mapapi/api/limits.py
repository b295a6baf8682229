"""The account's rate-limit buckets as they stand: what a long job has left."""

from flask import Blueprint, g

from ..contract.openapi import operation
from ..contract.schemas import RateLimitsSchema
from ..http.payload import respond_dumped
from ..http.ratelimit import bucket_report

bp = Blueprint("limits", __name__)


@bp.get("/rate-limits")
@operation(response=RateLimitsSchema)
def get_rate_limits():
    """Read each rate-limit bucket's limit, remaining, reset and window.

    Uses up none of them, so it answers even when the general bucket is
    empty: read it before a long job to know what it will wait for.
    """
    return respond_dumped({"buckets": bucket_report(f"account:{g.account.id}")})
