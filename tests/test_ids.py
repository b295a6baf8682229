"""Ids: opaque and URL-safe, a clock then 96 random bits, safe on a command line."""

import time

from mapapi.storage.models import _clock, could_be_id, new_id

CLOCK_LENGTH = 6


def test_ids_are_url_safe_unique_and_never_start_with_a_dash():
    ids = [new_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert all(could_be_id(value) and len(value) == 22 for value in ids)
    # A leading "-" would make `mapapi keys revoke KEY_ID` read the id as an option.
    assert not [value for value in ids if value.startswith("-")]


def test_after_the_clock_come_96_random_bits():
    randoms = {new_id()[CLOCK_LENGTH:] for _ in range(20_000)}
    assert len(randoms) == 20_000
    assert all(len(value) == 16 for value in randoms)  # 16 base64 digits = 96 bits
    # Every digit position takes all 64 values: none is fixed or narrowed.
    for position in range(16):
        assert len({value[position] for value in randoms}) == 64


def test_ids_made_in_the_same_second_share_their_clock():
    for _attempt in range(3):  # again if the second turned meanwhile
        second = int(time.time())
        ids = [new_id() for _ in range(100)]
        if int(time.time()) == second:
            break
    assert {value[:CLOCK_LENGTH] for value in ids} == {_clock(second)}


def test_the_clock_sorts_as_time_does_and_never_starts_with_a_dash():
    seconds = [0, 1, 63, 64, 1_000_000_000, 1_795_000_000, 1_795_000_001, 2**35 - 1]
    clocks = [_clock(second) for second in seconds]
    assert clocks == sorted(clocks)
    assert len(set(clocks)) == len(clocks)
    assert not [clock for clock in clocks if clock.startswith("-")]
    assert all(could_be_id(clock + "A" * 16) for clock in clocks)
