"""UTC timestamps: how they are made, written and read.

Timestamps are stored as naive UTC datetimes cut to whole milliseconds, so
that what is stored is exactly what the API shows.
"""

import re
from datetime import datetime, timezone

_TIME_DESIGNATOR = re.compile(r"\d[Tt ]\d")


def utcnow() -> datetime:
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def format_timestamp(value: datetime | None) -> str | None:
    """``2026-11-21T09:30:00.000Z``."""
    if value is None:
        return None
    return value.isoformat(timespec="milliseconds") + "Z"


def parse_timestamp(text: str) -> datetime:
    """Read an ISO 8601 date-time; one without an offset is UTC.

    Raises ValueError for anything else, a bare date included.
    """
    # fromisoformat stops reading at U+0000, so "...00\x00junk" would pass.
    if not isinstance(text, str) or "\x00" in text or not _TIME_DESIGNATOR.search(text):
        raise ValueError("not an ISO 8601 date-time")
    value = datetime.fromisoformat(text.strip())
    if value.tzinfo is not None:
        try:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        except OverflowError:  # 0001-01-01T00:00+01:00 is before year 1 in UTC
            raise ValueError("out of range") from None
    return value.replace(microsecond=value.microsecond // 1000 * 1000)
