"""The per-request step of the metrics: one count and one duration per answer.

Labelled by the route template Flask matched (``/api/v1/maps/<map_id>``,
never the path the client sent; ``unmatched`` for a path no route has), the
method (``other`` for one the service has no route for) and the status.
The label children are kept by their labels, so an answer costs a
dictionary lookup, a count and an observation. The pipeline (``pipeline.py``)
counts every answer here while the process serves its metrics
(``mapapi.metrics.serving``).
"""

from .. import metrics

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

#: (route, method, status) -> (the count's child, the duration's child).
_children: dict[tuple[str, str, int], tuple] = {}


def count(route: str, method: str, status: int, seconds: float) -> None:
    """One answer counted and timed (the caller, the pipeline, checks ``metrics.serving``)."""
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
