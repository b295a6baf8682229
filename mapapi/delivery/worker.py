"""The delivery loop: `mapapi worker` runs it in the foreground, `mapapi
serve` in a background thread, off the request path.

One thread follows the feed and claims due attempts; a pool of
``WEBHOOKS_CONCURRENCY`` threads makes them, so a slow receiver holds one
thread for at most its time-out and never the others. Any number of these
loops may share one database (see queue.py).
"""

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from flask import Flask

from ..config import is_on
from ..extensions import db
from . import queue
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
        self.allow_private = is_on(config["WEBHOOKS_ALLOW_PRIVATE"])
        self._free = threading.Semaphore(self.concurrency)
        self._pruned_at = 0.0

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
                    self.stop.wait(self.poll_seconds)

    def step(self, pool: ThreadPoolExecutor) -> bool:
        """One round: follow the feed, claim what is due and free threads can
        take, hand it to them. Whether there was anything to do."""
        with self.app.app_context():
            try:
                made = self._enqueue()
                claimed = self._claim()
                self._prune_now_and_then()
            finally:
                db.session.remove()
        for item in claimed:
            pool.submit(self._attempt, item)
        return bool(made or claimed)

    def _enqueue(self) -> int:
        total, after = 0, 0
        while after is not None:
            made, after = queue.enqueue_new_events(after)
            db.session.commit()
            total += made
        return total

    def _claim(self) -> list[queue.Claimed]:
        free, claimed = 0, []
        while free < self.concurrency and self._free.acquire(blocking=False):
            free += 1
        try:
            if free:
                found = queue.claim_due(free, self.lease_seconds)
                db.session.commit()
                claimed = found
        finally:
            for _ in range(free - len(claimed)):
                self._free.release()
        return claimed

    def _prune_now_and_then(self) -> None:
        if time.monotonic() - self._pruned_at < PRUNE_EVERY_SECONDS:
            return
        self._pruned_at = time.monotonic()
        queue.prune()
        db.session.commit()

    def _attempt(self, claimed: queue.Claimed) -> None:
        try:
            started = time.monotonic()
            outcome = self.send(claimed)
            duration_ms = round((time.monotonic() - started) * 1000)
            with self.app.app_context():
                try:
                    if queue.record(claimed, outcome, duration_ms, self.schedule):
                        db.session.commit()
                    else:
                        db.session.rollback()
                finally:
                    db.session.remove()
            if not outcome.succeeded:
                log.info(
                    "webhook %s: attempt %d of event %s failed: %s",
                    claimed.webhook_id, claimed.attempt, claimed.event_id, outcome.error,
                )
        except Exception:  # the outcome is lost; the lease makes the attempt again
            log.exception("webhook %s: recording an attempt failed", claimed.webhook_id)
        finally:
            self._free.release()

    def send(self, claimed: queue.Claimed) -> Outcome:
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


def start_in_background(app: Flask) -> tuple[threading.Thread, threading.Event] | None:
    """For `mapapi serve`: deliver in a daemon thread, unless turned off."""
    if not is_on(app.config["WEBHOOKS_DELIVER"]):
        return None
    worker = DeliveryWorker(app)
    thread = threading.Thread(target=worker.run, name="mapapi-webhooks", daemon=True)
    thread.start()
    return thread, worker.stop
