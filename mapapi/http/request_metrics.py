"""The per-request step of the metrics: one count and one duration per answer.

Labelled by the route template Flask matched (``/api/v1/maps/<map_id>``,
never the path the client sent; ``unmatched`` for a path no route has), the
method (``other`` for one the service has no route for) and the status.
The label children are kept by their labels, so an answer costs a
dictionary lookup, a count and an observation. It does nothing unless the
process serves its metrics (``mapapi.metrics.serving``).
"""

import time

from flask import g, request

from .. import metrics

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

#: (route, method, status) -> (the count's child, the duration's child).
_children: dict[tuple[str, str, int], tuple] = {}


def observe(response):
    if not metrics.serving:
        return response
    now = time.perf_counter()
    current = request._get_current_object()  # one context lookup each, for the reads below
    rule = current.url_rule
    count(
        rule.rule if rule is not None else "unmatched",
        current.method,
        response.status_code,
        now - getattr(g._get_current_object(), "started", now),
    )
    return response


def count(route: str, method: str, status: int, seconds: float) -> None:
    """One answer counted and timed (the caller checks ``metrics.serving``):
    ``observe``'s, and that of ``/mcp``'s layer in front of Flask."""
    method = method if method in METHODS else "other"
    key = (route, method, status)
    children = _children.get(key)
    if children is None:
        children = _children.setdefault(
            key,
            (
                metrics.REQUESTS.labels(route, method, str(status)),
                metrics.REQUEST_SECONDS.labels(route, method),
            ),
        )
    children[0].inc()
    children[1].observe(seconds)
