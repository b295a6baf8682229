"""The map's locations as they are, read once from the streamed GeoJSON export.

The export is parsed as it arrives (ijson's push parser), one Feature at a
time, and each is kept only as what the comparison needs, so the client's
memory holds the map once, never the export's text beside its objects.
A digest of the export's bytes names the state the plan was made against
(see ``plan.idempotency_key``).

ijson's C parser refuses an integer beyond 64 bits, which the API keeps
exactly in a client's properties: a map that holds one is read again by
ijson's Python parser (``ExactIntegers``), slower, and exactly.
"""

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import ijson
import orjson

from .http_client import ServiceError

#: The fields a row may give, in the order a Location keeps them.
FIELDS = (
    "name", "lat", "lng", "description", "address", "categoryId", "tagIds", "layerIds",
    "properties",
)  # fmt: skip
POSITION = {name: index for index, name in enumerate(FIELDS)}


_NO_LAYERS = frozenset()


def comparable(name: str, value):
    """A field's value in the form two values are compared in, as the
    service compares them: tags in order without repeats, layers as a set,
    ``properties`` as JSON text with sorted keys (compact, and key order
    does not count)."""
    if name == "tagIds":
        return tuple(dict.fromkeys(value))
    if name == "layerIds":
        return frozenset(value) if value else _NO_LAYERS
    if name == "properties":
        return json_bytes(value, orjson.OPT_SORT_KEYS)
    return value


def json_bytes(value, option: int = 0) -> bytes:
    """``value`` as compact JSON, in an object of its own size: orjson's own
    result keeps a buffer of some kilobytes, which 100,000 of them would
    turn into hundreds of megabytes. A value holding an integer beyond 64
    bits, which orjson refuses, is written by the standard library."""
    try:
        return bytes(memoryview(orjson.dumps(value, option=option)))
    except orjson.JSONEncodeError:
        sort_keys = bool(option & orjson.OPT_SORT_KEYS)
        return json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys, allow_nan=False
        ).encode()


class ExactIntegers(Exception):
    """The export holds an integer beyond 64 bits: read it with ``exact_parser``."""


def exact_parser():
    """ijson's Python parser, which keeps an integer of any size."""
    return ijson.get_backend("python")


class Location(NamedTuple):
    """A location of the map: its id and its fields, comparable, in ``FIELDS`` order."""

    id: str
    values: tuple

    def differs(self, fields: dict) -> list[str]:
        """The names of the ``fields`` (a row's) whose value is not the location's."""
        return [
            name
            for name, value in fields.items()
            if comparable(name, value) != self.values[POSITION[name]]
        ]

    @property
    def name(self) -> str:
        return self.values[0]


@dataclass
class MapState:
    """The map's locations that have an externalId, by it; the ids of the
    categories, tags and layers they use; how many have no externalId; and
    the digest of the export they were read from."""

    by_external_id: dict[str, Location] = field(default_factory=dict)
    known_ids: dict[str, set[str]] = field(
        default_factory=lambda: {"categoryId": set(), "tagIds": set(), "layerIds": set()}
    )
    without_external_id: int = 0
    digest: str = ""

    def add(self, feature: dict) -> None:
        given = feature["properties"]
        given["lng"], given["lat"] = feature["geometry"]["coordinates"][:2]
        for name, known in self.known_ids.items():
            value = given[name]
            if isinstance(value, list):
                known.update(value)
            elif value is not None:
                known.add(value)
        external_id = given.get("externalId")
        if external_id is None:
            self.without_external_id += 1
            return
        values = tuple(comparable(name, given[name]) for name in FIELDS)
        self.by_external_id[external_id] = Location(feature["id"], values)


def read_state(chunks: Iterable[bytes], parser=ijson) -> MapState:
    """The state of the map whose export arrives as ``chunks`` of bytes;
    ExactIntegers when ``parser`` cannot read one of its integers."""
    state, stream = MapState(), _Stream(chunks)
    try:
        for feature in parser.items(stream, "features.item", use_float=True):
            state.add(feature)
    except ijson.JSONError as error:
        if "integer overflow" in str(error) and parser is ijson:
            raise ExactIntegers from None
        raise ServiceError(f"the service's GeoJSON export could not be read: {error}") from None
    except (KeyError, TypeError, ValueError) as error:
        raise ServiceError(f"the service's GeoJSON export could not be read: {error}") from None
    state.digest = stream.digest.hexdigest()
    return state


class _Stream:
    """Chunks of bytes as a file ijson reads (its C parser reads files
    several times faster than it is fed chunks), digested as they pass."""

    def __init__(self, chunks: Iterable[bytes]):
        self.chunks = iter(chunks)
        self.digest = hashlib.sha256()
        self.pending = memoryview(b"")

    def read(self, size: int = -1) -> bytes:
        """At most ``size`` bytes (ijson's parser wants no more); b"" at the end."""
        while not self.pending:
            chunk = next(self.chunks, None)
            if chunk is None:
                return b""
            self.digest.update(chunk)
            self.pending = memoryview(chunk)
        size = len(self.pending) if size < 0 else size
        part, self.pending = self.pending[:size], self.pending[size:]
        return bytes(part)
