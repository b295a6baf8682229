"""The delivery loop: `mapapi worker` runs it in the foreground, `mapapi
serve` in a background thread, off the request path.

No account slows another's deliveries, by construction:

- Attempts run on one asyncio event loop with non-blocking sockets
  (``sender.post``): an attempt waiting on a receiver holds a socket, not
  a thread, so receivers that accept and never answer use up nothing the
  others need but their own slots below.
- A process makes at most ``WEBHOOKS_CONCURRENCY`` attempts at once, an
  account at most its ``share`` of them (a quarter, less as more accounts
  have attempts in flight), an endpoint at most two across all processes
  (``claims.PER_ENDPOINT``). Attempts over those bounds stay in the
  database, holding nothing.
- Claims are fair (``claims.claim_due``): accounts with due attempts
  take turns.
- Name lookups run on threads of their own, one per name being looked up
  (``addresses.Lookups``): a name whose lookup hangs delays only the
  attempts to it.
- The database work (recording outcomes, following the feed, claiming)
  runs on a thread of its own, so the loop keeps making attempts while a
  statement waits; the loop only hands it what finished and starts what
  it claimed.

Any number of these loops may share one database (see claims.py).
"""

import asyncio
import logging
import socket
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from queue import SimpleQueue

from flask import Flask

from ..extensions import db
from ..metrics import count_attempt
from ..timeutil import utcnow
from . import attempts, claims
from .addresses import AddressRefused, GetAddrInfo, Lookups, destination, system_lookups
from .sender import Outcome, post
from .signing import signed_headers

log = logging.getLogger(__name__)

#: How long an attempt is a process's own: beyond the name lookup (5 s)
#: and the receiver's time-out (10 s), with room to record the outcome.
LEASE_SECONDS = 60.0
#: How often a loop deletes what the retention no longer keeps.
PRUNE_EVERY_SECONDS = 600.0
#: The part of a process's attempts in flight one account may hold at most.
ACCOUNT_SHARE = 0.25
#: How long a round follows the feed before it claims again: a flood of
#: events to turn into attempts never holds up claiming those due.
FOLLOW_SLICE_SECONDS = 0.1


class DeliveryWorker:
    """One process's delivery loop.

    ``getaddrinfo`` is the resolver the attempts look names up with: the
    system's, or (tests) one standing in for it.
    """

    def __init__(
        self,
        app: Flask,
        stop: threading.Event | None = None,
        getaddrinfo: GetAddrInfo = socket.getaddrinfo,
    ):
        self.app = app
        self.stop = stop or threading.Event()
        config = app.config
        self.capacity = int(config["WEBHOOKS_CONCURRENCY"])
        self.poll_seconds = float(config["WEBHOOKS_POLL_SECONDS"])
        self.lease_seconds = float(config.get("WEBHOOKS_LEASE_SECONDS", LEASE_SECONDS))
        self.schedule = tuple(config["WEBHOOKS_RETRY_SCHEDULE"])
        self.allow_private = config["WEBHOOKS_ALLOW_PRIVATE"]
        self.lookups = system_lookups if getaddrinfo is socket.getaddrinfo else Lookups(getaddrinfo)
        #: Attempts made, waiting for the database thread to record them.
        self._finished: SimpleQueue[attempts.Finished] = SimpleQueue()
        #: Attempts in flight here, by account (changed on the loop's thread only).
        self._busy: Counter[str] = Counter()
        #: When the next pass over the endpoints starts, where this one is,
        #: and the attempts it has made so far.
        self._follow_at = 0.0
        self._following: int | None = None
        self._pass_made = 0
        self._pruned_at = 0.0
        #: The loop delivering, once ``run`` has started it.
        self._loop: asyncio.AbstractEventLoop | None = None

    def request_stop(self) -> None:
        """Stop after the attempts in flight, without waiting out the poll
        interval (from any thread: the loop is woken in its own)."""
        self.stop.set()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake.set)

    def run(self) -> None:
        """Deliver until ``stop`` is set, then let the attempts in flight finish."""
        asyncio.run(self._deliver())

    async def _deliver(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        flying: set[asyncio.Task] = set()
        with ThreadPoolExecutor(1, thread_name_prefix="mapapi-deliver-db") as database:
            while not self.stop.is_set():
                free = self.capacity - len(flying)
                try:
                    claimed, more = await loop.run_in_executor(
                        database, self.step, free, dict(self._busy)
                    )
                except Exception:  # a database outage: log it, try again later
                    log.exception("webhook delivery loop failed; retrying")
                    claimed, more = [], False
                for item in claimed:
                    self._busy[item.account_id] += 1
                    task = asyncio.create_task(self._attempt(item))
                    flying.add(task)
                    task.add_done_callback(flying.discard)
                if not more:
                    await self._idle()
            if flying:
                await asyncio.wait(list(flying))
            await loop.run_in_executor(database, self._record_last)

    async def _idle(self) -> None:
        """Until an attempt finishes, or the next poll."""
        try:
            await asyncio.wait_for(self._wake.wait(), self.poll_seconds)
        except TimeoutError:
            pass
        self._wake.clear()

    def share(self, busy: dict[str, int]) -> int:
        """How many attempts in flight one account may hold here now.

        A quarter of the capacity, and no more than an equal part of it
        among the accounts with attempts in flight and one more: however
        many accounts' receivers hang, a newcomer always finds room, and
        the others' part shrinks as their attempts end.
        """
        equal_part = self.capacity // (len(busy) + 1)
        return max(claims.PER_ENDPOINT, min(int(self.capacity * ACCOUNT_SHARE), equal_part))

    def step(self, free: int, busy: dict[str, int]) -> tuple[list[claims.Claimed], bool]:
        """One round, on the database thread: record what finished, claim up
        to ``free`` due attempts (``busy``: this process's in flight, by
        account), then follow the feed for a slice of time. The attempts
        claimed, and whether more may be waiting now."""
        with self.app.app_context():
            try:
                self._record_finished()
                claimed = []
                if free:
                    claimed = claims.claim_due(free, self.share(busy), busy, self.lease_seconds)
                db.session.commit()  # the claims, and the outcomes recorded before them
                following = self._follow_feed()
                self._prune_now_and_then()
            finally:
                db.session.remove()
        return claimed, following or (free > 0 and len(claimed) == free)

    def _follow_feed(self) -> bool:
        """Turn new events into attempts, endpoint after endpoint, for about
        ``FOLLOW_SLICE_SECONDS``; the next round goes on where this one
        stopped. A pass over every endpoint that found nothing new waits a
        poll interval before the next. Whether there is more to follow now."""
        if self._following is None:
            if time.monotonic() < self._follow_at:
                return False
            self._following, self._pass_made = 0, 0
        stop_at = time.monotonic() + FOLLOW_SLICE_SECONDS
        while self._following is not None and time.monotonic() < stop_at:
            made, self._following = attempts.enqueue_new_events(self._following)
            db.session.commit()
            self._pass_made += made
        if self._following is not None:
            return True
        self._follow_at = time.monotonic() + (0 if self._pass_made else self.poll_seconds)
        return bool(self._pass_made)

    def _prune_now_and_then(self) -> None:
        if time.monotonic() - self._pruned_at < PRUNE_EVERY_SECONDS:
            return
        self._pruned_at = time.monotonic()
        attempts.prune()
        db.session.commit()

    def _record_finished(self) -> None:
        """Record the outcomes of the attempts finished so far, in the
        round's transaction: one commit for many (SQLite syncs every commit).
        Should it fail, those attempts are made again when their leases end."""
        finished = []
        while not self._finished.empty():
            finished.append(self._finished.get())
        attempts.record(finished, self.schedule)

    def _record_last(self) -> None:
        with self.app.app_context():
            try:
                self._record_finished()
                db.session.commit()
            finally:
                db.session.remove()

    async def _attempt(self, claimed: claims.Claimed) -> None:
        """Make one attempt; the database thread records its outcome."""
        made_at, started = utcnow(), time.monotonic()
        try:
            outcome = await self.send(claimed)
            duration_ms = round((time.monotonic() - started) * 1000)
            self.attempt_made(attempts.Finished(claimed, outcome, made_at, duration_ms))
        except Exception:  # the outcome is lost; the lease makes the attempt again
            log.exception("webhook %s: an attempt failed unexpectedly", claimed.webhook_id)
        finally:
            self._busy[claimed.account_id] -= 1
            if not self._busy[claimed.account_id]:
                del self._busy[claimed.account_id]
            self._wake.set()

    def attempt_made(self, finished: attempts.Finished) -> None:
        """The one place every attempt's outcome passes: counted, logged if
        it failed, queued for recording."""
        outcome, claimed = finished.outcome, finished.claimed
        count_attempt(outcome)
        if not outcome.succeeded:
            log.info(
                "webhook %s: attempt %d of event %s failed: %s",
                claimed.webhook_id, claimed.attempt, claimed.event_id, outcome.error,
            )  # fmt: skip
        self._finished.put(finished)

    async def send(self, claimed: claims.Claimed) -> Outcome:
        """Resolve and check the address now, sign, POST."""
        try:
            found = await destination(
                claimed.url, allow_private=self.allow_private, lookups=self.lookups
            )
        except AddressRefused as refused:
            return Outcome(None, f"address refused: {refused}")
        except OSError as failure:
            return Outcome(None, f"the host did not resolve: {failure.strerror or failure}")
        body = claimed.body.encode("utf-8")
        headers = signed_headers(claimed.secret, claimed.event_id, claimed.body, time.time())
        return await post(found, headers, body)


def start_in_background(app: Flask) -> tuple[threading.Thread, DeliveryWorker] | None:
    """For `mapapi serve`: deliver in a daemon thread, unless turned off."""
    if not app.config["WEBHOOKS_DELIVER"]:
        return None
    worker = DeliveryWorker(app)
    thread = threading.Thread(target=worker.run, name="mapapi-webhooks", daemon=True)
    thread.start()
    return thread, worker
