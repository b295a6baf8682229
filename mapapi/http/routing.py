"""How a path is read: an id is never a word that a route spells out.

``/maps/<map_id>/locations/bulk`` sits beside
``/maps/<map_id>/locations/<location_id>``; read plainly, ``bulk`` would also
be a location id, so ``GET .../bulk`` would look for a location called
``bulk`` and ``OPTIONS .../bulk`` would be told ``Allow: DELETE, GET, HEAD,
POST, PUT``. The rule here holds for every route, those added later
included: a path variable never takes a value that is a fixed segment of
any route (``bulk``, ``import``, ``locations.geojson``, ...). No id can be
one (ids are 22 random characters), so no resource becomes unreachable.
"""

from flask import current_app, request
from werkzeug.routing import BaseConverter, Map, ValidationError


class IdConverter(BaseConverter):
    """The default path variable (``<map_id>``): any segment but a fixed one."""

    def __init__(self, map: Map, *args, **kwargs):
        super().__init__(map, *args, **kwargs)
        self._fixed: frozenset[str] | None = None

    def to_python(self, value: str) -> str:
        # Read once, at the first request: Flask adds no route after it.
        if self._fixed is None:
            self._fixed = fixed_segments(self.map)
        if value in self._fixed:
            raise ValidationError()  # werkzeug: this rule does not match
        return value


def fixed_segments(url_map: Map) -> frozenset[str]:
    """Every path segment that some route spells out, not a variable."""
    return frozenset(
        segment
        for rule in url_map.iter_rules()
        for segment in rule.rule.split("/")
        if segment and "<" not in segment
    )


def allowed_methods() -> list[str]:
    """The methods that route the current request's path somewhere, sorted.

    werkzeug's 405 lists the methods of every rule whose pattern fits the
    path before converters run, ``.../<location_id>`` included for
    ``.../bulk``; a method is kept here only if the path really routes with it.
    """
    adapter = current_app.create_url_adapter(request)
    candidates = adapter.allowed_methods()
    return sorted(method for method in candidates if adapter.test(method=method))
