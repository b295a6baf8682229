"""A tool call's arguments, checked against its schema before anything is
sent, then split into the API request they make.

A call that does not fit is refused with one sentence per argument at
fault, saying what it takes (``title: required``, ``lat: a number, not a
string``, ``colour: no such argument (did you mean color?)``). The check
is the JSON Schema validator's; integers are held to the API's rule (``1.0``
is not one).
"""

import difflib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from urllib.parse import quote

API_PREFIX = "/api/v1"
#: Items a list tool asks for unless the agent says otherwise (the API's
#: default is 50: too much to read at once).
LIST_PAGE_SIZE = 20
#: Sentences shown at most: a hundred bad items need not be read one by one.
MAX_SENTENCES = 40


def _is_integer(_checker, instance) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def strict_validator():
    """JSON Schema 2020-12 (OpenAPI 3.1's), with the API's integers; imported
    at the first call, so that ``mapapi mcp`` starts without it."""
    from jsonschema import Draft202012Validator, validators

    return validators.extend(
        Draft202012Validator,
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
    )

TYPE_NAMES = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


class ArgumentErrors(Exception):
    """A call that does not fit its tool: the sentences that say why."""

    def __init__(self, sentences: list[str]):
        super().__init__("\n".join(sentences))
        self.sentences = sentences

    def text(self) -> str:
        shown = self.sentences[:MAX_SENTENCES]
        lines = ["Invalid arguments; nothing was sent:", *(f"- {line}" for line in shown)]
        if len(self.sentences) > len(shown):
            lines.append(f"- and {len(self.sentences) - len(shown)} more")
        return "\n".join(lines)


@dataclass(frozen=True)
class Request:
    """The API request a call makes."""

    method: str
    path: str
    query: list[tuple[str, str]]
    body: dict | None
    content_type: str | None


def checked(tool, arguments: dict | None) -> dict:
    """``arguments`` as the tool takes them, or ArgumentErrors.

    An optional path or query argument given as null is one left out. A
    body field keeps its null where the API's field takes one
    (``categoryId: null`` clears the category); where it does not
    (``description``), null is the field left out: agents send it for "no
    value". NaN and the infinities are refused wherever they are, as the
    API refuses them: no encoder may turn them into null on the way.
    """
    arguments = dict(arguments or {})
    for name in tool.optional_arguments:
        if name in arguments and arguments[name] is None:
            del arguments[name]
    arguments = without_null_fields(arguments, tool.checked_schema)
    sentences = [f"{where(path)}: {NOT_FINITE}" for path in non_finite(arguments)]
    properties = tool.checked_schema["properties"]
    if "body" in arguments and "body" not in properties:
        sentences.append(_wrapped_body(arguments.pop("body"), tool))
    errors = sorted(tool.validator.iter_errors(arguments), key=_error_order)
    for error in errors:
        sentences.extend(describe_error(error, tool.input_schema["properties"]))
    if sentences:
        raise ArgumentErrors(list(dict.fromkeys(sentences)))
    return arguments


#: What a NaN or an infinity is told.
NOT_FINITE = "a finite number (NaN and Infinity are not numbers the API takes)"


def non_finite(value, path: tuple = ()) -> Iterable[tuple]:
    """The paths of the NaNs and infinities in ``value``, at any depth."""
    if isinstance(value, float):
        if not math.isfinite(value):
            yield path
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from non_finite(item, (*path, name))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from non_finite(item, (*path, index))


def without_null_fields(value, schema: dict):
    """``value`` without the nulls given to fields whose schema takes none,
    in nested objects and the items of arrays too (a free-form object such
    as ``properties`` keeps everything: its schema names no fields)."""
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        fields = schema["properties"]
        return {
            name: without_null_fields(item, fields.get(name, {}))
            for name, item in value.items()
            if item is not None or name not in fields or takes_null(fields[name])
        }
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [without_null_fields(item, schema["items"]) for item in value]
    return value


def takes_null(schema: dict) -> bool:
    """Whether a field of ``schema`` may be null (one with no type takes anything)."""
    if any(key in schema for key in ("anyOf", "oneOf")):
        return any(takes_null(option) for option in schema.get("anyOf", schema.get("oneOf")))
    kind = schema.get("type")
    return kind is None or kind == "null" or (isinstance(kind, list) and "null" in kind)


def request_for(tool, arguments: dict) -> Request:
    """The request that checked ``arguments`` make (a list's page size the
    agent left out is the tool's, not the API's)."""
    path = tool.path
    for name in tool.path_params:
        path = path.replace("{" + name + "}", quote(str(arguments[name]), safe=""))
    query = []
    for name in tool.query_params:
        if name in arguments:
            query.extend((name, _query_value(value)) for value in _values(arguments[name]))
        elif name == tool.page_size_param:
            query.append((name, str(LIST_PAGE_SIZE)))
    query.extend((name, value) for name, value in tool.fixed_query.items())
    body = None
    if tool.body_fields is not None:
        body = {name: arguments[name] for name in tool.body_fields if name in arguments}
    return Request(tool.method, API_PREFIX + path, query, body, tool.body_media_type)


def _values(value) -> Iterable:
    return value if isinstance(value, list) else [value]


def _query_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _error_order(error):
    return [str(part) for part in error.absolute_path], error.validator


def _wrapped_body(body, tool) -> str:
    fields = ", ".join(sorted(body)) if isinstance(body, dict) and body else "its fields"
    return (
        f"body: no such argument; pass {fields} flat, beside the other arguments "
        f"(as {tool.name} lists them), not inside body"
    )


def where(path: Iterable) -> str:
    """``locations[3].lat`` for the path ``["locations", 3, "lat"]``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _joined(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def describe_error(error, top_level: dict) -> list[str]:
    """The sentences that say what one schema error means for the call."""
    at = where(error.absolute_path)
    schema, instance, kind = error.schema, error.instance, error.validator
    if kind == "required":
        return [f"{_joined(at, name)}: required" for name in error.validator_value if name not in instance]
    if kind == "additionalProperties":
        known = top_level if not at else schema.get("properties", {})
        noun = "argument" if not at else "field"
        return [
            f"{_joined(at, name)}: no such {noun}{_did_you_mean(name, known)}"
            for name in sorted(set(instance) - set(schema.get("properties", {})))
        ]
    return [f"{at}: {_what_it_takes(error)}"]


def _what_it_takes(error) -> str:
    schema, instance, kind, value = error.schema, error.instance, error.validator, error.validator_value
    if kind == "type":
        return f"{_type_names(value)}, not {_type_of(instance)}"
    if kind == "enum":
        options = ", ".join(json.dumps(option) for option in value)
        return f"one of {options}, not {json.dumps(instance)}{_did_you_mean(instance, value)}"
    if kind == "const":
        return f"must be {json.dumps(value)}"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return f"{_range(schema, 'minimum', 'maximum', '')}, not {_number(instance)}"
    if kind in ("minLength", "maxLength"):
        return f"{_range(schema, 'minLength', 'maxLength', ' characters')}, not {len(instance)}"
    if kind in ("minItems", "maxItems"):
        return f"{_range(schema, 'minItems', 'maxItems', ' items')}, not {len(instance)}"
    if kind == "pattern":
        return f"must match {value}"
    if kind in ("anyOf", "oneOf"):
        types = [option.get("type") for option in value]
        if all(isinstance(name, str) for name in types):
            return f"{_type_names(types)}, not {_type_of(instance)}"
    if kind == "uniqueItems":
        return "each item once"
    return error.message


def _range(schema: dict, low: str, high: str, unit: str) -> str:
    lowest, highest = schema.get(low), schema.get(high)
    if lowest is not None and highest is not None:
        return f"{_number(lowest)} to {_number(highest)}{unit}"
    if lowest is not None:
        return f"at least {_number(lowest)}{unit}"
    return f"at most {_number(highest)}{unit}"


def _number(value) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _type_names(expected) -> str:
    names = [expected] if isinstance(expected, str) else list(expected)
    return " or ".join(TYPE_NAMES.get(name, name) for name in names)


def _type_of(instance) -> str:
    if instance is None:
        return "null"
    if isinstance(instance, bool):
        return "a boolean"
    if isinstance(instance, int):
        return "an integer"
    if isinstance(instance, float):
        return "a number"
    if isinstance(instance, str):
        return "a string"
    if isinstance(instance, list):
        return "an array"
    return "an object"


def _did_you_mean(given, options) -> str:
    """`` (did you mean color?)`` for a near name or value, else nothing."""
    if not isinstance(given, str):
        return ""
    options = [option for option in options if isinstance(option, str)]
    same_but_case = [option for option in options if option.lower() == given.lower()]
    close = same_but_case or difflib.get_close_matches(given, options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""
