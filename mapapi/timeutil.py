"""UTC timestamps: how they are made, written and read.

Timestamps are stored as naive UTC datetimes cut to whole milliseconds, so
that what is stored is exactly what the API shows.
"""

import calendar
import re
from datetime import date, datetime, timedelta, timezone

_TIME_DESIGNATOR = re.compile(r"\d[Tt ]\d")
# ISO 8601 allows a decimal fraction on the last unit given: "T10.5" is
# 10:30 and "T10:30.5" 10:30:30. datetime.fromisoformat would read either
# fraction as one of a second, so it is taken off and applied here.
_HOUR_OR_MINUTE_FRACTION = re.compile(
    r"(?<=[Tt ])\d\d(:?\d\d)?([.,]\d+)(?=[Zz+-]|$)", re.ASCII
)
# What fromisoformat would misread rather than refuse, after the time
# designator: a fraction inside the offset ("+01.5"), a decimal sign with
# no digit after it ("T10.Z"), a "Z" that does not end the text.
_MISREAD_TIME = re.compile(r"[+-][0-9:]*[.,]|[.,](?![0-9])|[Zz].", re.ASCII)
# An ordinal date (year and day of the year, "2030-152"), which
# fromisoformat does not read. Digits are ASCII ones, as fromisoformat's.
_ORDINAL_DATE = re.compile(r"(\d{4})-?(\d{3})(?=[Tt ])", re.ASCII)


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
    if not isinstance(text, str) or "\x00" in text:
        raise ValueError("not an ISO 8601 date-time")
    text = text.strip()
    designator = _TIME_DESIGNATOR.search(text)
    if designator is None or _MISREAD_TIME.search(text, designator.end() - 1):
        raise ValueError("not an ISO 8601 date-time")
    if text.endswith("z"):  # RFC 3339 allows it; fromisoformat wants "Z"
        text = text[:-1] + "Z"
    text, fraction = _take_unit_fraction(_calendar_date(text))
    try:
        value = datetime.fromisoformat(text) + fraction
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
    except OverflowError:  # beyond year 1..9999, once converted to UTC
        raise ValueError("out of range") from None
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def _calendar_date(text: str) -> str:
    """``text`` with an ordinal date written as a calendar date."""
    ordinal = _ORDINAL_DATE.match(text)
    if ordinal is None:
        return text
    year, day = int(ordinal.group(1)), int(ordinal.group(2))
    if not 1 <= day <= (366 if calendar.isleap(year) else 365):
        raise ValueError("no such day of the year")
    calendar_date = date(year, 1, 1) + timedelta(days=day - 1)
    return calendar_date.isoformat() + text[ordinal.end() :]


def _take_unit_fraction(text: str) -> tuple[str, timedelta]:
    """``text`` without a fraction of an hour or a minute, and that fraction."""
    found = _HOUR_OR_MINUTE_FRACTION.search(text)
    if found is None:
        return text, timedelta(0)
    unit = timedelta(minutes=1) if found.group(1) else timedelta(hours=1)
    # In whole numbers, cut (not rounded) below a microsecond: 12 digits of
    # an hour are finer than that.
    twelve_digits = int(found.group(2)[1:13].ljust(12, "0"))
    microseconds = twelve_digits * (unit // timedelta(microseconds=1)) // 10**12
    return text[: found.start(2)] + text[found.end(2) :], timedelta(microseconds=microseconds)
