"""Settings shared by every part of the benchmark: sizes, limits, paths."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
LUA_SCRIPT = HERE / "lua" / "scenario.lua"
API = "/api/v1"

#: High enough never to bind, on a one-second window: Flask-Limiter's
#: in-memory moving window keeps one entry per request still in the window,
#: so "N per hour" would make the limiter's list (and its cost) grow through
#: the whole benchmark; a second holds about as many entries as production's
#: "1000 per hour" does at most.
RAISED_LIMIT = "10000000 per second"

SERVER_THREADS = 8
BULK_SIZE = 100
PAGE_SIZE = 100
BIG_MAP_LOCATIONS = 100_000
#: 5 accounts x 4 maps x 500 locations = the 10,000 spread over maps.
ACCOUNTS = 5
MAPS_PER_ACCOUNT = 4
LOCATIONS_PER_MAP = 500
#: Locations of the big map that carry its rare tag (the tag filter's scenario).
RARE_TAG_LOCATIONS = 40
#: What tests/test_queries.py allows a fixed-size request (SMALL there).
SMALL_STATEMENT_COUNT = 12


def progress(message: str) -> None:
    """Progress goes to stderr so that stdout holds only the results."""
    print(message, file=sys.stderr, flush=True)

