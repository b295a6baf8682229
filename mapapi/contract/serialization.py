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
from operator import attrgetter, itemgetter

from marshmallow import Schema, fields

from ..timeutil import format_timestamp
from .fields import Timestamp

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
    plans = {
        reader: [
            (field.data_key or name, *_extractor(name, field, reader))
            for name, field in schema.dump_fields.items()
        ]
        for reader in (itemgetter, attrgetter)
    }
    by_key, by_attribute = plans[itemgetter], plans[attrgetter]

    def dump(obj):
        dumped = {}
        for key, read, convert in by_key if isinstance(obj, dict) else by_attribute:
            value = read(obj)
            dumped[key] = value if value is None or convert is None else convert(value)
        return dumped

    return dump


def _extractor(name: str, field: fields.Field, reader) -> tuple[Dumper, Dumper | None]:
    """``(read, convert)``: ``convert(read(obj))`` is the field's dumped value,
    ``read(obj)`` itself where ``convert`` is None or the value is None."""
    if type(field) is fields.Function:
        return (lambda obj: field._serialize(None, name, obj)), None
    convert = _converter(field)
    if convert is None:
        return (lambda obj: field.serialize(name, obj)), None
    return reader(field.attribute or name), convert


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
