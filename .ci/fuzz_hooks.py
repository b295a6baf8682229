"""Schemathesis hooks for .ci/fuzz: the contract's rules that JSON Schema cannot state.

The contract trims a resource's own string fields and counts their length
afterwards; a JSON Schema `maxLength` counts the characters as sent. So a name
of 50 characters sent with a leading U+0085 is valid for the contract and
"too long" for the schema. A negative case is dropped as a failure only when
its body was the one part made invalid and the body, trimmed as the contract
trims it, satisfies the operation's schema; any other accepted invalid request
stays a failure.
"""

from __future__ import annotations

import jsonschema
import schemathesis
from schemathesis import GenerationMode

# Values the contract keeps exactly as sent: free-form GeoJSON-like properties.
UNTRIMMED_FIELDS = frozenset({"properties"})


def trimmed(value):
    """The value with every string trimmed, as the server trims a body's fields."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return [trimmed(item) for item in value]
    if isinstance(value, dict):
        return {
            name: item if name in UNTRIMMED_FIELDS else trimmed(item)
            for name, item in value.items()
        }
    return value


def only_the_body_is_invalid(case) -> bool:
    components = case.meta.components if case.meta is not None else {}
    negative = {location for location, info in components.items() if info.mode is GenerationMode.NEGATIVE}
    return negative == {"body"}


def body_validator(case) -> jsonschema.Validator:
    """A validator of the operation's JSON body, its `$ref`s resolved in the document."""
    content = case.operation.definition.raw["requestBody"]["content"]
    schema = dict(content[case.media_type]["schema"])
    schema["components"] = case.operation.schema.raw_schema.get("components", {})
    return jsonschema.Draft202012Validator(schema)


@schemathesis.hook
def filter_failure(context, failure, case, response) -> bool:
    """Keep a failure unless it is an accepted body that is valid once trimmed."""
    if failure.code != "ST201" or not only_the_body_is_invalid(case):
        return True
    body = trimmed(case.body)
    if body == case.body:
        return True
    return not body_validator(case).is_valid(body)
