"""Answers an agent can hold: JSON text of at most a given length.

A list keeps the items that fit, from the first. One value alone too long
(a location with 10,000 characters of description and 100 layers) keeps
its shape with its longest parts cut: a string ends with ``CUT``, a list or
a many-membered object loses its last members, and the members of a record
share what room there is, the small ones kept whole.
"""

import json
import re

import orjson

#: The mark at the end of a string that was cut.
CUT = "…[cut]"
#: An object with more members than this is a collection (ids to errors, a
#: client's properties): cut like a list, keeping its first members whole.
RECORD_MEMBERS = 20
#: A run of 19 digits: a number that may be beyond 64 bits, which orjson
#: would read as a float (or a string that holds one: read slower, as well).
_LONG_DIGITS = re.compile(rb"\d{19}")


def dumps(value) -> str:
    """The compact JSON text of ``value``, as the tools answer it: orjson's,
    the same text as the standard library's several times sooner (the
    bounding measures an answer more than once)."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, which a client's properties may hold
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def loads(text: bytes):
    """The value of JSON ``text`` as the API wrote it: orjson's, or the
    standard library's when it may hold an integer beyond 64 bits (the API
    keeps a client's properties exactly)."""
    return json.loads(text) if _LONG_DIGITS.search(text) else orjson.loads(text)


def size(value) -> int:
    return len(dumps(value))


def items_that_fit(items: list, room: int) -> int:
    """How many of ``items``, from the first, fit in ``room`` characters as a JSON array."""
    used = 2
    for count, item in enumerate(items):
        used += size(item) + (1 if count else 0)
        if used > room:
            return count
    return len(items)


def shortened(value, room: int):
    """``value`` with its longest parts cut so that its JSON fits in ``room`` characters."""
    for _ in range(5):  # a cut string's escapes may overshoot a little: cut again
        result = _shorten(value, room)
        overshoot = size(result) - room
        if overshoot <= 0:
            return result
        room -= overshoot
    return result


def _shorten(value, room: int):
    if size(value) <= room:
        return value
    if isinstance(value, str):
        return _cut_string(value, room)
    if isinstance(value, list):
        return _leading(value, room)
    if isinstance(value, dict):
        if len(value) > RECORD_MEMBERS:
            return dict(_leading(list(value.items()), room, pairs=True))
        return _shared(value, room)
    return value  # a number, a boolean or null: nothing to cut


def _cut_string(text: str, room: int) -> str:
    keep = max(0, room - 2 - len(CUT))
    while keep > 0 and size(text[:keep] + CUT) > room:
        keep -= max(1, size(text[:keep] + CUT) - room)
    return text[:keep] + CUT


def _leading(items: list, room: int, pairs: bool = False) -> list:
    """The first items that fit whole, and the next one cut if room is left."""
    kept, used = [], 2
    for item in items:
        part = {item[0]: item[1]} if pairs else item
        need = (size(part) - 2 if pairs else size(part)) + (1 if kept else 0)
        if used + need <= room:
            kept.append(item)
            used += need
            continue
        left = room - used - (1 if kept else 0)
        if pairs:
            left -= size(item[0]) + 1
        if left > len(CUT) + 2:
            kept.append((item[0], _shorten(item[1], left)) if pairs else _shorten(item, left))
        break
    return kept


def _shared(record: dict, room: int) -> dict:
    """Each member whole if it is small, else cut to an equal share of the room left."""
    frame = size(dict.fromkeys(record, 0)) - len(record)  # braces, names, colons, commas
    sizes = sorted((size(value), name) for name, value in record.items())
    left, whole, share = room - frame, set(), 0
    for position, (length, name) in enumerate(sizes):
        others = len(sizes) - position
        if length * others > left:
            share = left // others
            break
        whole.add(name)
        left -= length
    return {
        name: value if name in whole else _shorten(value, max(share, 2))
        for name, value in record.items()
    }
