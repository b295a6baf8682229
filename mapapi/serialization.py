"""Output schemas compiled into plain functions: the same output, much sooner.

marshmallow's ``dump`` looks every field's options up again for every
object; a page of 100 locations with their tags and layers spends most of
its time there. ``compile_dumper`` reads a schema's fields once and returns
a function that builds exactly what ``schema.dump`` would (same keys, same
conversions, ``None`` kept as ``None``), so the schema stays the one
definition of a response. A field kind it does not know is dumped by the
field itself, as marshmallow would.
"""

from collections.abc import Callable

from marshmallow import Schema, fields

from .fields import Timestamp
from .timeutil import format_timestamp

Dumper = Callable[[object], object]

_SIMPLE = {
    fields.String: str,
    fields.Integer: int,
    fields.Float: float,
    fields.Boolean: bool,
    Timestamp: format_timestamp,
}


def compile_dumper(schema: Schema) -> Dumper:
    """``obj -> dict``, equal to ``schema.dump(obj)``; ``obj`` an object or a dict."""
    plan = [
        (field.data_key or name, _extractor(name, field))
        for name, field in schema.dump_fields.items()
    ]

    def dump(obj):
        return {key: extract(obj) for key, extract in plan}

    return dump


def _extractor(name: str, field: fields.Field) -> Dumper:
    """``obj -> the field's dumped value``."""
    if type(field) is fields.Function:
        return lambda obj: field._serialize(None, name, obj)
    convert = _converter(field)
    if convert is None:
        return lambda obj: field.serialize(name, obj)
    attribute = field.attribute or name

    def extract(obj):
        value = obj[attribute] if isinstance(obj, dict) else getattr(obj, attribute)
        return None if value is None else convert(value)

    return extract


def _converter(field: fields.Field) -> Callable[[object], object] | None:
    """``value -> dumped value`` for a value that is not None; None when the
    field is of a kind only the field itself knows how to dump."""
    kind = type(field)
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind is fields.Nested:
        nested = compile_dumper(field.schema)
        return (lambda items: [nested(item) for item in items]) if field.many else nested
    if kind is fields.List:
        inner = _converter(field.inner)
        if inner is None:
            return None
        return lambda items: [None if item is None else inner(item) for item in items]
    if kind in (fields.Dict, fields.Raw) and not getattr(field, "value_field", None):
        return lambda value: value
    return None
