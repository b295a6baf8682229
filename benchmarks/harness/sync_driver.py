"""A load driver for writes that must differ on every request (``sync_writes.py``).

wrk replays a fixed list of requests, which cannot keep "all new" new nor
"all changed" changed. Here a few threads each hold one keep-alive HTTP
connection (``http.client``) and write items of their own, numbering their
requests; every answer's status and counts are checked. It reports what
wrk does (requests/s, latency percentiles, the server's CPU, its own CPU,
unexpected answers) plus the events recorded, in a ``Measurement``.

The measured phase starts with every thread idle and ends when every
thread has had its last answer, so each request counted started and ended
inside it, and so did the events it recorded.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .data import Seeded
from .load import Measurement, merge_counts, process_cpu_seconds
from .servers import Server
from .sync_writes import WriteMode, owner_items


@dataclass
class _Owner:
    """One thread's connection, items and tallies."""

    number: int
    connection: http.client.HTTPConnection
    items: list[dict]
    sent: int = 0
    latencies: list[float] = field(default_factory=list)
    unexpected: Counter = field(default_factory=Counter)


@dataclass
class SyncLoad:
    """What the driver writes to (a server with an events counter), with how many threads."""

    server: Server
    seeded: Seeded
    headers: dict[str, str]
    threads: int


def drive(load: SyncLoad, mode: WriteMode, stamp: str, warmup: float, duration: float):
    """One measurement of ``mode``: each thread's first request (which creates
    its set), ``warmup`` seconds not counted, then ``duration`` seconds."""
    driver = _Driver(load, mode, stamp)
    try:
        driver.first_requests()
        if warmup > 0:
            driver.run_for(warmup)
        return driver.measure(duration)
    finally:
        driver.close()


class _Driver:
    def __init__(self, load: SyncLoad, mode: WriteMode, stamp: str):
        self.load, self.mode, self.stamp = load, mode, stamp
        self.path = mode.path(load.seeded)
        address = urlsplit(load.server.base_url)
        self.owners = [
            _Owner(n, http.client.HTTPConnection(address.hostname, address.port, timeout=60),
                   owner_items(mode.map_in(load.seeded), n))
            for n in range(load.threads)
        ]  # fmt: skip

    def send(self, owner: _Owner, counts_checked: bool = True) -> None:
        """The owner's next request; its latency, or what was unexpected about it."""
        body = self.mode.body(owner.items, self.stamp, f"t{owner.number}", owner.sent)
        owner.sent += 1
        started = time.perf_counter()
        try:
            owner.connection.request("POST", self.path, body, self.load.headers)
            response = owner.connection.getresponse()
            answer = response.read()
        except (OSError, http.client.HTTPException):
            owner.connection.close()  # http.client connects again for the next request
            owner.unexpected["socket errors"] += 1
            return
        owner.latencies.append(time.perf_counter() - started)
        if response.status != self.mode.expected_status:
            owner.unexpected[f"{response.status}"] += 1
        elif counts_checked and not self.mode.answered_right(json.loads(answer), len(owner.items)):
            owner.unexpected["wrong counts"] += 1

    def first_requests(self) -> None:
        """Each thread's first request, which creates its set (so its counts
        are not the mode's): all must succeed."""
        self._in_threads(lambda owner: self.send(owner, counts_checked=False))
        failed = self._unexpected()
        if failed:
            raise SystemExit(f"{self.mode.label}: the first request of a thread failed: {failed}")

    def run_for(self, seconds: float) -> None:
        """Every thread sends, one request after the other, until ``seconds`` have passed."""
        deadline = time.monotonic() + seconds

        def work(owner: _Owner) -> None:
            while time.monotonic() < deadline:
                self.send(owner)

        self._in_threads(work)

    def measure(self, seconds: float) -> Measurement:
        for owner in self.owners:
            owner.latencies.clear()
            owner.unexpected.clear()
        server, counter = self.load.server.process.pid, self.load.server.events
        mark, server_before = counter.mark(), process_cpu_seconds(server)
        own_before, started = time.process_time(), time.monotonic()
        self.run_for(seconds)
        took = time.monotonic() - started
        own_cpu = time.process_time() - own_before
        server_cpu = process_cpu_seconds(server) - server_before
        events = counter.since(mark)
        latencies = sorted(latency for owner in self.owners for latency in owner.latencies)
        return Measurement(
            rps=len(latencies) / took,
            p50_ms=1000 * _percentile(latencies, 0.50),
            p99_ms=1000 * _percentile(latencies, 0.99),
            requests=len(latencies),
            unexpected=self._unexpected(),
            server_cpu=100 * server_cpu / took,
            wrk_cpu=100 * own_cpu / took,
            events=events,
        )

    def close(self) -> None:
        for owner in self.owners:
            owner.connection.close()

    def _unexpected(self) -> dict[str, int]:
        return merge_counts(owner.unexpected for owner in self.owners)

    def _in_threads(self, work) -> None:
        threads = [threading.Thread(target=work, args=(owner,)) for owner in self.owners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(fraction * len(values)))]
