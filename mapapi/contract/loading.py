"""Input schemas compiled into a quick path for valid input.

A bulk of 100 locations spent most of its validation in marshmallow's loop
around the fields (hooks, an error store, partial loading, a closure per
field), not in the fields themselves. ``compile_loader`` returns a function
that runs each field's own ``deserialize``, in the schema's order, then the
schema's ``post_load`` hooks: what ``schema.load`` does for valid input.
At the first error, or for anything the quick path does not take (a body
that is not an object, a field the schema does not know), it hands the
input to ``schema.load``, whose answer counts, with every message. So the
rules and the messages stay where they are: in the fields and the schema.

It reads two private parts of marshmallow 4, the schema's ``_hooks`` and
``_invoke_load_processors``; ``tests/test_loading.py`` fails if a release
changes what they do.
"""

from collections.abc import Callable

from marshmallow import RAISE, Schema, ValidationError, missing
from marshmallow.decorators import POST_LOAD, PRE_LOAD, VALIDATES, VALIDATES_SCHEMA

Loader = Callable[[object], dict]


def compile_loader(schema: Schema) -> Loader:
    """``data -> dict``, the same as ``schema.load(data)``: the same value, or
    the same ValidationError."""
    if not _takes_quick_path(schema):
        return schema.load
    plan = [
        (field.data_key or name, field.attribute or name, field)
        for name, field in schema.load_fields.items()
    ]
    known = frozenset(key for key, _, _ in plan)
    # A partial update (PUT) skips the fields left out: neither required nor
    # filled with their default; marshmallow passes ``partial`` on to fields.
    partial = schema.partial is True
    options = {"partial": True} if partial else {}

    def load(data) -> dict:
        if type(data) is dict and known.issuperset(data):
            try:
                loaded = {}
                for key, attribute, field in plan:
                    raw = data.get(key, missing)
                    if raw is missing and partial:
                        continue
                    value = field.deserialize(raw, key, data, **options)
                    if value is not missing:
                        loaded[attribute] = value
                return schema._invoke_load_processors(
                    POST_LOAD,
                    loaded,
                    many=False,
                    original_data=data,
                    partial=schema.partial,
                    unknown=schema.unknown,
                )
            except ValidationError:
                pass  # schema.load finds it again, with the other errors
        return schema.load(data)

    return load


def _takes_quick_path(schema: Schema) -> bool:
    """A plain schema of one object: no hook but ``post_load``, unknown
    fields refused, no dotted attribute, partial for all fields or none."""
    hooks = schema._hooks
    return (
        not schema.many
        and schema.partial in (None, False, True)
        and schema.unknown == RAISE
        and not (hooks[PRE_LOAD] or hooks[VALIDATES] or hooks[VALIDATES_SCHEMA])
        and not any("." in (field.attribute or "") for field in schema.load_fields.values())
    )
