"""The in-memory rate-limit storage: windows as exact as limits' own, pruned
by one long-lived thread instead of a new thread every 10 ms of traffic."""

import threading
import time

import pytest

from limits import parse
from limits.strategies import MovingWindowRateLimiter

from mapapi.http import memory_window
from mapapi.http.memory_window import SteadyMemoryStorage


def test_requests_spread_over_time_start_no_expiry_threads(app, api):
    """limits' MemoryStorage replaces its ``timer`` with a new thread 10 ms
    after the last one ended; here the one pruner stays."""
    storage = app.extensions["mapapi.buckets"].limiter.primary.storage
    if not isinstance(storage, SteadyMemoryStorage):
        pytest.skip("this run counts rate limits in Redis, not in memory")
    pruner = storage.timer
    for _ in range(8):
        assert api.get("/maps").status_code == 200
        time.sleep(0.02)  # each past the previous timer's 10 ms
    assert storage.timer is pruner and pruner.is_alive()


def test_the_window_stays_exact_and_expired_entries_are_pruned(monkeypatch):
    monkeypatch.setattr(memory_window, "PRUNE_EVERY_SECONDS", 0.05)
    storage = SteadyMemoryStorage()
    window = MovingWindowRateLimiter(storage)
    limit = parse("3 per second")
    assert [window.hit(limit, "k") for _ in range(4)] == [True, True, True, False]
    assert window.get_window_stats(limit, "k").remaining == 0
    time.sleep(1.2)  # the window has moved past all three; the pruner ran since
    assert storage.events == {}
    assert window.get_window_stats(limit, "k").remaining == 3
    assert window.hit(limit, "k")


def test_the_pruner_ends_with_its_storage():
    storage = SteadyMemoryStorage()
    pruner = storage.timer
    assert pruner.is_alive()
    del storage
    pruner.join(timeout=memory_window.PRUNE_EVERY_SECONDS * 3)
    assert not pruner.is_alive()


def test_the_general_bucket_still_refuses_at_its_limit(app, api):
    app.extensions["mapapi.buckets"].items["general"] = parse("3 per hour")
    statuses = [api.get("/maps").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]


def test_a_window_is_read_under_the_lock_the_pruner_takes():
    """While the pruner holds a key's lock (shortening its list), a read of
    that key's window waits for it, and then counts what is left."""
    storage = SteadyMemoryStorage()
    limiter, limit = MovingWindowRateLimiter(storage), parse("5 per minute")
    for _ in range(3):
        assert limiter.hit(limit, "k")
    key = limit.key_for("k")
    answers = []
    reader = threading.Thread(target=lambda: answers.append(storage.get_moving_window(key, 5, 60)))
    with storage.locks[key]:
        reader.start()
        reader.join(timeout=0.3)
        assert reader.is_alive() and not answers  # waiting for the lock
        del storage.events[key][1:]
    reader.join(timeout=5)
    assert answers and answers[0][1] == 1
