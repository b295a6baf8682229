"""limits' in-memory storage, pruned by one long-lived thread.

``limits.storage.MemoryStorage`` drops expired moving-window entries from a
``threading.Timer`` it starts anew 10 ms after the last one ended, for as
long as requests come: at 2,000 requests a second that is a hundred new
threads a second, each started, and waited for, inside the request that
happened to come next (a tenth of a refused request's time in-process).
Here one daemon thread prunes instead, once a second.

The windows are as exact either way: an entry older than its window is
never counted, pruned or not (``acquire_entry`` and ``get_moving_window``
compare times); pruning only keeps the lists from growing.
"""

import bisect
import threading
import time
import weakref

from limits.storage import MemoryStorage

PRUNE_EVERY_SECONDS = 1.0


class SteadyMemoryStorage(MemoryStorage):
    """Made by ``ratelimit.init_app`` for a ``memory://`` storage (no scheme of its own)."""

    def __init__(self):
        super().__init__()
        # MemoryStorage starts a new expiry timer whenever its ``timer`` is
        # no longer alive: the pruner stays alive, so none is started.
        self.timer = _Pruner(self)
        self.timer.start()

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """limits reads a window without its key's lock: the pruner could
        shorten the list between the search and the read (an IndexError,
        a 500). Read it under the lock the pruner takes."""
        with self.locks[key]:
            return super().get_moving_window(key, limit, expiry)

    def prune(self) -> None:
        """Drop every entry and counter past its expiry, and keys left with none."""
        now = time.time()
        for key in list(self.events):
            with self.locks[key]:
                entries = self.events.get(key)
                if entries:  # newest first
                    del entries[bisect.bisect_left(entries, -now, key=_negative_expiry) :]
                if not entries:
                    self.events.pop(key, None)
                    self.locks.pop(key, None)
        for key, expiry in list(self.expirations.items()):
            if expiry <= now:
                self.storage.pop(key, None)
                self.expirations.pop(key, None)


def _negative_expiry(entry) -> float:
    return -entry.expiry


class _Pruner(threading.Thread):
    """Prunes its storage every second for as long as the storage exists."""

    def __init__(self, storage: SteadyMemoryStorage):
        super().__init__(name="mapapi-rate-limit-pruner", daemon=True)
        self.storage = weakref.ref(storage)

    def run(self) -> None:
        while True:
            time.sleep(PRUNE_EVERY_SECONDS)
            storage = self.storage()
            if storage is None:
                return
            storage.prune()
            del storage
