"""Ids: opaque, URL-safe, 128 random bits, and safe on a command line."""

from mapapi.models import could_be_id, new_id


def test_ids_are_url_safe_unique_and_never_start_with_a_dash():
    ids = [new_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert all(could_be_id(value) and len(value) == 22 for value in ids)
    # A leading "-" would make `mapapi keys revoke KEY_ID` read the id as an option.
    assert not [value for value in ids if value.startswith("-")]
