"""The delivery loop: `mapapi worker` runs it in the foreground, `mapapi
serve` in a background thread, off the request path.

One thread follows the feed and claims due attempts; a pool of
``WEBHOOKS_CONCURRENCY`` threads makes them, so a slow receiver holds one
thread for at most its time-out and never the others. Any number of these
loops may share one database (see attempts.py).
"""

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from queue import SimpleQueue

from flask import Flask

from ..extensions import db
from ..metrics import count_attempt
from . import attempts
from .addresses import AddressRefused, destination
from .sender import Outcome, post
from .signing import signed_headers

log = logging.getLogger(__name__)

#: How long an attempt is a process's own: beyond the name lookup (5 s)
#: and the receiver's time-out (10 s), with room to record the outcome.
LEASE_SECONDS = 60.0
#: How often a loop deletes what the retention no longer keeps.
PRUNE_EVERY_SECONDS = 600.0


class DeliveryWorker:
    def __init__(self, app: Flask, stop: threading.Event | None = None):
        self.app = app
        self.stop = stop or threading.Event()
        config = app.config
        self.concurrency = int(config["WEBHOOKS_CONCURRENCY"])
        self.poll_seconds = float(config["WEBHOOKS_POLL_SECONDS"])
        self.lease_seconds = float(config.get("WEBHOOKS_LEASE_SECONDS", LEASE_SECONDS))
        self.schedule = tuple(config["WEBHOOKS_RETRY_SCHEDULE"])
        self.allow_private = config["WEBHOOKS_ALLOW_PRIVATE"]
        # Attempts claimed and not yet made: those in flight, and as many
        # again waiting for a thread, so that threads never wait for a round.
        self._slots = 2 * self.concurrency
        self._free = threading.Semaphore(self._slots)
        self._wake = threading.Event()
        self._finished: SimpleQueue = SimpleQueue()
        self._follow_at = 0.0
        self._pruned_at = 0.0

    def request_stop(self) -> None:
        """Stop after the attempts in flight, without waiting out the poll interval."""
        self.stop.set()
        self._wake.set()

    def run(self) -> None:
        """Deliver until ``stop`` is set, then let the attempts in flight finish."""
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="mapapi-deliver") as pool:
            while not self.stop.is_set():
                try:
                    busy = self.step(pool)
                except Exception:  # a database outage: log it, try again later
                    log.exception("webhook delivery loop failed; retrying")
                    busy = False
                if not busy:
                    # Until the next poll, or sooner when a thread comes free.
                    self._wake.wait(self.poll_seconds)
                    self._wake.clear()
        with self.app.app_context():
            try:
                self._record_finished()
                db.session.commit()
            finally:
                db.session.remove()

    def step(self, pool: ThreadPoolExecutor) -> bool:
        """One round: follow the feed (at most once a poll interval while it
        has nothing new), claim what is due and free threads can take, hand
        it to them. Whether more may be waiting right now."""
        with self.app.app_context():
            try:
                self._record_finished()
                made = 0
                if time.monotonic() >= self._follow_at:
                    made = self._enqueue()
                    self._follow_at = time.monotonic() + (0 if made else self.poll_seconds)
                claimed, free = self._claim()
                self._prune_now_and_then()
            finally:
                db.session.remove()
        for item in claimed:
            pool.submit(self._attempt, item)
        return bool(made) or (free > 0 and len(claimed) == free)

    def _enqueue(self) -> int:
        total, after = 0, 0
        while after is not None:
            made, after = attempts.enqueue_new_events(after)
            db.session.commit()
            total += made
        return total

    def _claim(self) -> tuple[list[attempts.Claimed], int]:
        """The attempts claimed, and how many threads were free to take them."""
        free, claimed = 0, []
        while free < self._slots and self._free.acquire(blocking=False):
            free += 1
        try:
            found = attempts.claim_due(free, self.lease_seconds) if free else []
            db.session.commit()  # the claims, and the outcomes recorded before them
            claimed = found
        finally:
            for _ in range(free - len(claimed)):
                self._free.release()
        return claimed, free

    def _prune_now_and_then(self) -> None:
        if time.monotonic() - self._pruned_at < PRUNE_EVERY_SECONDS:
            return
        self._pruned_at = time.monotonic()
        attempts.prune()
        db.session.commit()

    def _attempt(self, claimed: attempts.Claimed) -> None:
        """Make one attempt (in a pool thread); the loop records its outcome."""
        try:
            started = time.monotonic()
            outcome = self.send(claimed)
            count_attempt(outcome)
            self._finished.put((claimed, outcome, round((time.monotonic() - started) * 1000)))
            if not outcome.succeeded:
                log.info(
                    "webhook %s: attempt %d of event %s failed: %s",
                    claimed.webhook_id, claimed.attempt, claimed.event_id, outcome.error,
                )
        except Exception:  # the outcome is lost; the lease makes the attempt again
            log.exception("webhook %s: an attempt failed unexpectedly", claimed.webhook_id)
        finally:
            self._free.release()
            self._wake.set()

    def _record_finished(self) -> None:
        """Record the outcomes of the attempts finished so far, in the
        round's transaction: one commit for many (SQLite syncs every commit).
        Should it fail, those attempts are made again when their leases end."""
        finished = []
        while not self._finished.empty():
            finished.append(self._finished.get())
        attempts.record(finished, self.schedule)

    def send(self, claimed: attempts.Claimed) -> Outcome:
        """Resolve and check the address now, sign, POST."""
        try:
            found = destination(claimed.url, allow_private=self.allow_private)
        except AddressRefused as refused:
            return Outcome(None, f"address refused: {refused}")
        except OSError as failure:
            return Outcome(None, f"the host did not resolve: {failure.strerror or failure}")
        body = claimed.body.encode("utf-8")
        headers = signed_headers(claimed.secret, claimed.event_id, claimed.body, time.time())
        return post(found, headers, body)


def start_in_background(app: Flask) -> tuple[threading.Thread, DeliveryWorker] | None:
    """For `mapapi serve`: deliver in a daemon thread, unless turned off."""
    if not app.config["WEBHOOKS_DELIVER"]:
        return None
    worker = DeliveryWorker(app)
    thread = threading.Thread(target=worker.run, name="mapapi-webhooks", daemon=True)
    thread.start()
    return thread, worker
