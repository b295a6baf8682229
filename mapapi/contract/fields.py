"""Strict marshmallow fields: the contract's rules for types, strings and ids.

marshmallow on its own is lenient (``"1.5"`` is a float, ``"true"`` a
boolean, ``1.9`` an integer); these fields accept only the JSON type asked
for, trim strings and refuse U+0000 and text that is not valid Unicode.
"""

import math
import re

from marshmallow import ValidationError, fields, validate

from ..timeutil import format_timestamp, parse_timestamp, utcnow
from .documents import Document, document_text

NUL = "\x00"
PROPERTIES_MAX_BYTES = 16_384
PROPERTIES_MAX_DEPTH = 10
IDS_MAX = 100


def check_text(value: str) -> None:
    """Refuse U+0000 (PostgreSQL cannot store it) and lone surrogates."""
    if NUL in value:
        raise ValidationError("Must not contain the character U+0000.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("Must be valid Unicode text.") from None


class Text(fields.String):
    """A resource's own string: trimmed; lengths count characters after it."""

    def _deserialize(self, value, attr, data, **kwargs):
        text = super()._deserialize(value, attr, data, **kwargs).strip()
        check_text(text)
        return text


class Choice(fields.String):
    """An enum value: exact, never trimmed (``" dark "`` is invalid)."""

    def __init__(self, choices, **kwargs):
        super().__init__(validate=validate.OneOf(choices), **kwargs)


class Color(Text):
    """``#RRGGBB`` in either case, kept upper case."""

    def __init__(self, **kwargs):
        super().__init__(
            validate=validate.Regexp(r"^#[0-9A-Fa-f]{6}$", error="Must be a color as #RRGGBB."),
            **kwargs,
        )

    def _deserialize(self, value, attr, data, **kwargs):
        return super()._deserialize(value, attr, data, **kwargs).upper()


class StrictBoolean(fields.Boolean):
    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


def _is_json_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class StrictFloat(fields.Float):
    """A JSON number: not a string, a boolean, NaN or Infinity."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not _is_json_number(value):
            raise self.make_error("invalid")
        try:
            return super()._deserialize(value, attr, data, **kwargs)
        except OverflowError:
            raise self.make_error("too_large") from None


class StrictInteger(fields.Integer):
    """A JSON integer written as one: ``1.0`` is not."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class Timestamp(fields.Field):
    """ISO 8601 in, ``2026-11-21T09:30:00.000Z`` out."""

    default_error_messages = {"invalid": "Not a valid ISO 8601 date-time."}

    def _serialize(self, value, attr, obj, **kwargs):
        return format_timestamp(value)

    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return parse_timestamp(value)
        except (TypeError, ValueError):
            raise self.make_error("invalid") from None


def in_the_future(value) -> None:
    if value <= utcnow():
        raise ValidationError("Must be in the future.")


class IdList(fields.List):
    """Up to 100 ids as sent; duplicates collapse, first occurrence wins."""

    def __init__(self, metadata=None, **kwargs):
        super().__init__(
            fields.String(), metadata={"maxItems": IDS_MAX, **(metadata or {})}, **kwargs
        )

    def _deserialize(self, value, attr, data, **kwargs):
        if type(value) is list and all(type(item) is str for item in value):
            ids = value  # what String gives back for each, item by item, unchanged
        else:
            ids = super()._deserialize(value, attr, data, **kwargs)
        if len(ids) > IDS_MAX:  # counted as sent, before duplicates collapse
            raise ValidationError(f"At most {IDS_MAX} ids.")
        return list(dict.fromkeys(ids))


class Properties(fields.Dict):
    """The client's own JSON object, bounded in size and depth."""

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        _check_json_tree(value)
        text = document_text(value)
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValidationError("Must be valid Unicode text.") from None
        if size > PROPERTIES_MAX_BYTES:
            raise ValidationError(
                f"Must be at most {PROPERTIES_MAX_BYTES} bytes as compact UTF-8 JSON."
            )
        return Document(value, text)


def _check_json_tree(root: dict) -> None:
    """Depth (the object itself is level 1), U+0000 and non-finite numbers."""
    pending = [(root, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > PROPERTIES_MAX_DEPTH:
            raise ValidationError(f"Must be nested at most {PROPERTIES_MAX_DEPTH} levels deep.")
        children = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in children:
            if isinstance(key, str) and NUL in key:
                raise ValidationError("Must not contain the character U+0000.")
            if isinstance(child, (dict, list)):
                pending.append((child, depth + 1))
            elif isinstance(child, str) and NUL in child:
                raise ValidationError("Must not contain the character U+0000.")
            elif isinstance(child, float) and not math.isfinite(child):
                raise ValidationError("Must not contain NaN or Infinity.")


_DIGITS = re.compile(r"[0-9]+")


class QueryInteger(fields.Integer):
    """A query-string integer written in decimal digits only."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str) or not _DIGITS.fullmatch(value):
            raise self.make_error("invalid")
        try:
            return int(value)
        except ValueError:  # more digits than Python converts
            raise self.make_error("too_large") from None


class QueryTexts(fields.List):
    """A query parameter given one or more times (``?a=1&a=2``), each value
    trimmed and 1..``max_length`` characters, at most ``max_count`` values.

    Its errors are one flat list of sentences under the parameter's name,
    as for any other query field.
    """

    def __init__(self, *, max_length: int, max_count: int, **kwargs):
        super().__init__(
            fields.String(validate=validate.Length(1, max_length)),
            metadata={"maxItems": max_count, **kwargs.pop("metadata", {})},
            **kwargs,
        )
        self.max_length = max_length
        self.max_count = max_count

    def _deserialize(self, value, attr, data, **kwargs):
        values = value if isinstance(value, list) else [value]
        if len(values) > self.max_count:
            raise ValidationError(f"At most {self.max_count} values.")
        texts = []
        for text in values:
            if not isinstance(text, str):
                raise ValidationError("Not a valid string.")
            text = text.strip()
            check_text(text)
            if not 1 <= len(text) <= self.max_length:
                raise ValidationError(
                    f"Each value must be 1 to {self.max_length} characters after trimming."
                )
            texts.append(text)
        return texts


class Ignored(fields.Raw):
    """A read-only field of the resource: accepted in a body and dropped.

    Whatever its value, except U+0000, which is refused anywhere in a body.
    """

    def __init__(self, **kwargs):
        # Described as readOnly, so that generated clients and Swagger UI's
        # examples leave it out; never dumped: input schemas only load.
        super().__init__(
            allow_none=True,
            metadata={
                "readOnly": True,
                "description": "Read-only: accepted, whatever its value, and ignored.",
            },
            **kwargs,
        )

    def _deserialize(self, value, attr, data, **kwargs):
        if _contains_nul(value):
            raise ValidationError("Must not contain the character U+0000.")
        return value


def _contains_nul(value) -> bool:
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, str):
            if NUL in node:
                return True
        elif isinstance(node, dict):
            pending.extend(node.keys())
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False
