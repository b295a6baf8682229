"""What a tool call answers: the API's ``data``, bounded, or a tool error.

A success is the ``data`` as structured content and as JSON text, followed
by a note when there is more to read (the next page, the next events) or
when the answer was cut to fit. No answer has more than ``TEXT_LIMIT``
characters of text:

- a page that would pass it keeps the items that fit, as exactly the page
  the API gives for a smaller ``pageSize`` (so ``page``/``pageSize``
  continue it without a gap);
- a change feed keeps the events that fit, ``next`` the last one kept;
- a write's list (``created``, ``deleted``, ...) keeps the items that fit,
  its counts whole;
- one item alone too long keeps its shape with its longest values cut
  (``sizes.shortened``): the API over HTTP gives it whole.

An API error is a tool error: ``CODE (status): message`` and its details.
"""

import math

import mcp_types as types

from .sizes import CUT, dumps, items_that_fit, shortened, size

TEXT_LIMIT = 20_000
#: Room kept beside the JSON text for the note.
NOTE_ROOM = 1_000
JSON_ROOM = TEXT_LIMIT - NOTE_ROOM
#: Room kept for a page's numbers, which change when it is cut.
NUMBERS_ROOM = 64

WHY = f"an answer holds {TEXT_LIMIT:,} characters at most"
SHORTENED = (
    f"too long for one answer ({WHY}): its longest values are cut (a string ends with "
    f"{CUT}, a list loses its last items); the API over HTTP gives it whole."
)


def answer(data, note: str | None = None) -> types.CallToolResult:
    content = [types.TextContent(type="text", text=dumps(data))]
    if note:
        content.append(types.TextContent(type="text", text=note))
    return types.CallToolResult(content=content, structured_content=data)


def failure(text: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=True
    )


def success(data) -> types.CallToolResult:
    """A success's ``data``, bounded, with what to call next."""
    if not isinstance(data, dict):
        return answer({"result": data})
    if "pagination" in data:
        return _page(data, _list_field(data))
    if "hasMore" in data and "events" in data:
        return _feed(data)
    field = _list_field(data) if "id" not in data else None
    if field is not None:
        return _written(data, field)
    if size(data) <= JSON_ROOM:
        return answer(data)
    return answer(shortened(data, JSON_ROOM), "This answer is " + SHORTENED)


def _list_field(data: dict) -> str | None:
    fields = [name for name, value in data.items() if isinstance(value, list)]
    return fields[0] if len(fields) == 1 else None


def _page(data: dict, field: str) -> types.CallToolResult:
    items, pagination = data[field], data["pagination"]
    if size(data) <= JSON_ROOM:
        return answer(data, _more_pages(pagination, field))
    room = JSON_ROOM - size({**data, field: []}) - NUMBERS_ROOM
    fitting = items_that_fit(items, room)
    start = (pagination["page"] - 1) * pagination["pageSize"]
    # The largest smaller page that starts where this one does.
    page_size = next(d for d in range(max(fitting, 1), 0, -1) if start % d == 0)
    kept = items[:page_size]
    one_cut = ""
    if fitting == 0:
        kept = [shortened(items[0], room)]
        one_cut = f" Its one item is {SHORTENED}"
    page = start // page_size + 1
    total = pagination["total"]
    smaller = {
        "total": total,
        "page": page,
        "pageSize": page_size,
        "totalPages": math.ceil(total / page_size),
    }
    note = (
        f"Page {pagination['page']} of pageSize {pagination['pageSize']} is too long "
        f"({WHY}): this is page {page} of pageSize {page_size}, the same first items."
        + one_cut
    )
    more = _more_pages(smaller, field)
    return answer({**data, field: kept, "pagination": smaller}, f"{note} {more or ''}".strip())


def _more_pages(pagination: dict, field: str) -> str | None:
    page, pages = pagination["page"], pagination["totalPages"]
    if page >= pages:
        return None
    return (
        f"Page {page} of {pages} ({pagination['total']} {field} in all): "
        f"page={page + 1}, pageSize={pagination['pageSize']} gives the next."
    )


def _feed(data: dict) -> types.CallToolResult:
    events = data["events"]
    if size(data) <= JSON_ROOM:
        note = None
        if data["hasMore"]:
            note = f"More events follow: call again with after={data['next']}."
        return answer(data, note)
    room = JSON_ROOM - size({**data, "events": []}) - NUMBERS_ROOM
    fitting = items_that_fit(events, room)
    kept = events[:fitting] or [shortened(events[0], room)]
    note = f"Only {len(kept)} of the {len(events)} events read fit ({WHY})"
    if not fitting:
        note = f"The first event is {SHORTENED}"
    bounded = {**data, "events": kept, "next": kept[-1]["id"], "hasMore": True}
    return answer(bounded, f"{note} Call again with after={bounded['next']} for the rest.")


def _written(data: dict, field: str) -> types.CallToolResult:
    items = data[field]
    if size(data) <= JSON_ROOM:
        return answer(data)
    room = JSON_ROOM - size({**data, field: []})
    fitting = items_that_fit(items, room)
    kept = items[:fitting] or [shortened(items[0], room)]
    note = (
        f"The answer lists the first {len(kept)} of the {len(items)} {field} ({WHY}); "
        "list_locations reads them all."
    )
    return answer({**data, field: kept}, note)


def error_text(status: int, body, retry_after: str | None) -> str:
    """``CODE (status): message``, the details, and for a 429 when to try again."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return f"The service answered HTTP {status} without an error body."
    lines = [f"{error.get('code')} ({status}): {error.get('message')}"]
    if "details" in error:
        details = error["details"]
        if size(details) > JSON_ROOM:
            details = shortened(details, JSON_ROOM)
            lines.append(f"(the details are cut to the first fields at fault: {WHY})")
        lines.append("details: " + dumps(details))
    if status == 429:
        lines.append(f"Retry after {retry_after or '1'} seconds.")
    return "\n".join(lines)
