"""``export_geojson``: a map's locations as GeoJSON Features, a page at a time.

The HTTP export streams a whole map in one answer, which no agent can
hold. The tool reads the same locations (the same filters and sort) from
the list instead, a page of the API at a time, and writes each as the
export writes it; it answers at most ``limit`` Features (fewer when more
would not fit in one answer), the total, and ``next``: the cursor of the
rest (the position of the next Feature), or null at the end.
"""

from urllib.parse import urlencode

from .arguments import Request
from .results import JSON_ROOM, NUMBERS_ROOM, SHORTENED, answer
from .sizes import items_that_fit, shortened, size
from .tools import EXPORT_LIMIT

#: Locations read per request (the API's largest page).
READ_SIZE = 100


def feature(location: dict) -> dict:
    """A location as the export writes it: a Point Feature of its fields."""
    return {
        "type": "Feature",
        "id": location["id"],
        "geometry": {"type": "Point", "coordinates": [location["lng"], location["lat"]]},
        "properties": {
            "name": location["name"],
            "description": location["description"],
            "address": location["address"],
            "categoryId": location["categoryId"],
            "tagIds": location["tagIds"],
            "layerIds": [layer["id"] for layer in location["layers"]],
            "properties": location["properties"],
            "externalId": location["externalId"],
            "createdAt": location["createdAt"],
            "updatedAt": location["updatedAt"],
        },
    }


async def export_page(send, request: Request, arguments: dict, base_url: str):
    """The page of Features ``arguments`` ask for; ``request`` is the HTTP
    export's (its path and filters), ``send`` makes an API request and
    gives its ``Answer``, or the error result of a failed one."""
    start = int(arguments.get("cursor") or 0)
    limit = arguments.get("limit", EXPORT_LIMIT)
    list_path = request.path.removesuffix(".geojson")
    features, total, read_to = [], None, start - start % READ_SIZE
    while len(features) < limit and (total is None or read_to < total):
        query = [*request.query, ("page", str(read_to // READ_SIZE + 1)), ("pageSize", str(READ_SIZE))]
        page = await send(Request("get", list_path, query, None, None))
        if not isinstance(page, dict):
            return page  # the API's error, as a tool error
        total = page["pagination"]["total"]
        skip = max(0, start - read_to)
        features += [feature(location) for location in page["locations"][skip:]]
        read_to += READ_SIZE
        if size(features) > JSON_ROOM or not page["locations"]:
            break
    features = features[:limit]
    frame = {"type": "FeatureCollection", "features": [], "total": total, "next": None}
    room = JSON_ROOM - size(frame) - NUMBERS_ROOM
    fitting = items_that_fit(features, room)
    kept = features[:fitting] or [shortened(feature_, room) for feature_ in features[:1]]
    after = start + len(kept)
    data = {**frame, "features": kept, "next": str(after) if after < total else None}
    return answer(data, _note(data, start, request, base_url, whole=fitting == len(kept)))


def _note(data: dict, start: int, request: Request, base_url: str, whole: bool) -> str:
    shown = len(data["features"])
    lines = [
        f"Features {start + 1} to {start + shown} of {data['total']}."
        if shown
        else f"No Features from position {start + 1}; {data['total']} in all."
    ]
    if not whole:
        lines.append(f"The Feature is {SHORTENED}")
    if data["next"] is not None:
        lines.append(f"cursor={data['next']} gives the next.")
    query = urlencode(request.query)
    address = f"{base_url.rstrip('/')}{request.path}" + (f"?{query}" if query else "")
    lines.append(
        f"The whole FeatureCollection in one file: GET {address} with the header "
        "Authorization: Bearer <key> (not through this tool)."
    )
    return " ".join(lines)
