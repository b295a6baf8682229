"""The compiled loaders give exactly what marshmallow's load gives.

For every body schema a view declares, generated bodies (mostly valid, some
with one field set to any JSON value, some with an unknown field) load to
the same value through the compiled loader as through ``schema.load``, or
fail with the same messages.
"""

import string
from datetime import datetime, timedelta, timezone
from inspect import isfunction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from mapapi.api import categories, keys, layers, locations, maps, tags
from mapapi.contract.fields import (
    Choice,
    Color,
    IdList,
    Ignored,
    Properties,
    StrictBoolean,
    StrictFloat,
    StrictInteger,
    Timestamp,
)
from mapapi.contract.loading import compile_loader
from mapapi.contract.schemas import InputSchema, LocationInputSchema

DECLARED = {
    view.__qualname__: view.operation
    for module in (maps, categories, tags, layers, locations, keys)
    for view in vars(module).values()
    if isfunction(view) and getattr(view, "operation", None) and view.operation.body
}

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=6,
)
PADDED_TEXT = st.builds(
    "{}{}{}".format, st.sampled_from(["", " ", "\t"]), st.text(max_size=12), st.just(" ")
)
IDS = st.text(string.ascii_letters + string.digits + "-_", min_size=22, max_size=22)
NOW = datetime.now(timezone.utc)


def _bounds(field) -> tuple:
    found = [v for v in field.validators if isinstance(v, validate.Range)]
    return (found[0].min, found[0].max) if found else (None, None)


def plausible(field: fields.Field) -> st.SearchStrategy:
    """Values of the kind ``field`` takes, mostly valid."""
    if isinstance(field, Ignored):
        kinds = JSON
    elif isinstance(field, StrictBoolean):
        kinds = st.booleans()
    elif isinstance(field, StrictInteger):
        kinds = st.integers(-3, 10**20)
    elif isinstance(field, StrictFloat):
        low, high = _bounds(field)
        kinds = st.floats(low - 1, high + 1) | st.integers(int(low) - 1, int(high) + 1)
    elif isinstance(field, Color):
        kinds = st.from_regex(r"#[0-9A-Fa-f]{6}", fullmatch=True) | PADDED_TEXT
    elif isinstance(field, Choice):
        kinds = st.sampled_from(sorted(field.validators[0].choices)) | PADDED_TEXT
    elif isinstance(field, Timestamp):
        offsets = st.timedeltas(timedelta(days=-2), timedelta(days=2))
        kinds = offsets.map(lambda offset: (NOW + offset).isoformat())
    elif isinstance(field, IdList):
        kinds = st.lists(IDS, max_size=4).map(lambda ids: ids + ids[:1])
    elif isinstance(field, Properties):
        kinds = st.dictionaries(st.text(max_size=4), JSON, max_size=3)
    else:
        kinds = PADDED_TEXT
    return kinds | st.none() if field.allow_none else kinds


@st.composite
def bodies(draw, schema: Schema) -> dict:
    body = {}
    for name, field in schema.load_fields.items():
        if (field.required and schema.partial is not True) or draw(st.booleans()):
            body[field.data_key or name] = draw(plausible(field))
    twist = draw(st.integers(0, 5))
    if twist == 0:  # one known field set to anything
        keys = sorted(field.data_key or name for name, field in schema.load_fields.items())
        body[draw(st.sampled_from(keys))] = draw(JSON)
    elif twist == 1:  # one field too many, or one wrongly named
        body[draw(st.text(max_size=6))] = draw(JSON)
    return body


def outcome(load, data):
    try:
        return "loaded", load(data)
    except ValidationError as error:
        return "refused", error.messages


@pytest.mark.parametrize("view", sorted(DECLARED))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_body_schema_compiles_to_the_same_load(view, data):
    schema = DECLARED[view].body
    body = data.draw(bodies(schema))
    assert outcome(DECLARED[view].load, body) == outcome(schema.load, body)


@pytest.mark.parametrize(
    "body",
    [None, [], "text", 1, {"lat": 1, "lng": 2}, {"name": "x", "lat": 1, "lng": 2, "extra": 1}],
)
def test_what_is_not_a_valid_object_gets_marshmallows_answer(body):
    schema = LocationInputSchema()
    assert outcome(compile_loader(schema), body) == outcome(schema.load, body)
    assert outcome(schema.load, body)[0] == "refused"


def test_valid_input_takes_the_quick_path_without_marshmallows_load():
    class Watched(LocationInputSchema):
        def load(self, *_args, **_kwargs):
            raise AssertionError("the quick path handed a valid body to schema.load")

    body = {
        "name": " Café ",
        "lat": 48.85,
        "lng": 2,
        "tagIds": ["a" * 22, "b" * 22, "a" * 22],
        "properties": {"n": [1, {"x": None}]},
        "id": "ignored",
        "layers": [],
    }
    assert compile_loader(Watched())(body) == LocationInputSchema().load(body) == {
        "name": "Café",
        "lat": 48.85,
        "lng": 2.0,
        "description": "",
        "address": "",
        "category_id": None,
        "tag_ids": ["a" * 22, "b" * 22],
        "properties": {"n": [1, {"x": None}]},
        "external_id": None,
        "layer_ids": [],
    }


def test_a_schema_the_quick_path_cannot_follow_is_loaded_by_marshmallow_itself():
    class Checked(InputSchema):
        low = fields.Integer()
        high = fields.Integer()

        @validates_schema
        def ordered(self, data, **_kwargs):
            if data.get("low", 0) > data.get("high", 0):
                raise ValidationError("low above high")

    checked, partial = Checked(), LocationInputSchema(partial=("name",))
    assert compile_loader(checked) == checked.load
    assert compile_loader(partial) == partial.load
    assert outcome(compile_loader(checked), {"low": 2, "high": 1})[0] == "refused"


def test_every_declared_body_takes_the_quick_path():
    assert len(DECLARED) >= 10
    slow = [view for view, declared in DECLARED.items() if declared.load == declared.body.load]
    assert slow == []
