"""The keys this process has refused for good, so that a client retrying one
costs no lookup.

A refusal is remembered only when nothing can turn it into an acceptance:

- an unknown key: every secret is drawn by the server (256 random bits)
  and stored hashed, so a secret that matches no key now never will;
- a revoked key: revocation is never undone;
- an expired key: a key's expiry is fixed when it is made.

A key that is accepted, or refused for its plan or its scope (both can
change), is looked up on every request, so revocation stays immediate.
Each entry still lasts at most ``SECONDS``, for an operator who swaps the
database under a running server, and the process keeps at most
``MAX_KEYS``, dropping the oldest first, so that a client sending a new
key with every request costs memory it cannot grow.
"""

import threading
import time

from flask import current_app

#: How many refused keys a process remembers (about 200 bytes each).
MAX_KEYS = 10_000
#: How long one is remembered.
SECONDS = 300.0


class RefusedKeys:
    """Secret hash -> the 401 code it was refused with, for ``SECONDS``.

    Reads take no lock: one ``dict.get``, which every request that sends a
    key pays. Additions, which follow a lookup anyway, take one.
    """

    def __init__(self, max_keys: int = MAX_KEYS, seconds: float = SECONDS, clock=time.monotonic):
        self.max_keys = max_keys
        self.seconds = seconds
        self.clock = clock
        self._refused: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._refused)

    def code(self, secret_hash: str) -> str | None:
        """The code ``secret_hash`` was refused with, while it is remembered."""
        entry = self._refused.get(secret_hash)
        if entry is None or entry[1] <= self.clock():
            return None
        return entry[0]

    def add(self, secret_hash: str, code: str) -> None:
        with self._lock:
            self._refused.pop(secret_hash, None)  # re-added last: the newest
            while len(self._refused) >= self.max_keys:
                del self._refused[next(iter(self._refused))]
            self._refused[secret_hash] = (code, self.clock() + self.seconds)


def init_app(app) -> None:
    app.extensions["mapapi.refused_keys"] = RefusedKeys()


def refused_keys() -> RefusedKeys:
    return current_app.extensions["mapapi.refused_keys"]
