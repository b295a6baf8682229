"""Webhook deliveries per second to a local receiver (issue 17).

For each way of delivering (``mapapi serve``'s background thread, one
``mapapi worker``, two of them), on the seeded database:

1. an API server that does not deliver (``MAPAPI_WEBHOOKS_DELIVER=0``)
   takes a new endpoint pointing at the receiver, then bulk creates whose
   ``location.created`` events make a backlog of N events;
2. the deliverer starts, and the receiver counts verified deliveries until
   it has all N (or a time-out).

deliveries/s is N over the time from the first arrival to the last: the
rate of a backlog, without the start of the process and its first poll,
which "all received after" includes. ``MAPAPI_WEBHOOKS_ALLOW_PRIVATE=1``
(the documented setting for trusted setups, which the tests use too) lets
the endpoint point at 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .data import Seeded
from .event_count import EventCounter
from .load import process_cpu_seconds
from .servers import (
    DIRECT,
    Processes,
    mapapi_command,
    server_environment,
    start_app_server,
    stop_process,
    tail,
)
from .settings import API, BULK_SIZE, progress
from .sync_writes import MODES, auth_headers, owner_items
from .webhook_receiver import Receiver

ALLOW_PRIVATE = {"MAPAPI_WEBHOOKS_ALLOW_PRIVATE": "1"}
#: (label, command, processes)
DELIVERERS = (("mapapi serve", "serve", 1), ("mapapi worker", "worker", 1),
              ("2 mapapi workers", "worker", 2))  # fmt: skip
#: Seconds to wait for the last delivery, at least, and per delivery.
PATIENCE = (60.0, 0.05)


@dataclass
class Delivery:
    deliverer: str
    events: int
    received: int
    #: From the first arrival to the last.
    seconds: float
    #: From the deliverer's start to the last arrival.
    all_after: float
    #: The delivering processes' CPU per delivery, first arrival to last.
    cpu_ms: float
    #: The receiver's CPU (this process), % of one core, first arrival to last.
    receiver_cpu: float
    duplicates: int
    refused: int

    @property
    def per_second(self) -> float:
        return self.received / self.seconds if self.seconds else 0.0

    @property
    def unexpected(self) -> dict[str, int]:
        counts = {
            "missing": self.events - self.received,
            "duplicates": self.duplicates,
            "refused": self.refused,
        }
        return {label: count for label, count in counts.items() if count}


@dataclass
class _Place:
    """Where deliverers run: the database, the folder for logs, the processes."""

    url: str
    workdir: Path
    processes: Processes
    backend: str

    def start(self, command: str, count: int) -> list[tuple[subprocess.Popen, Path]]:
        """``mapapi serve`` (delivering in its background thread) or ``count`` workers."""
        if command == "serve":
            name = f"{self.backend}-delivering"
            server = start_app_server(
                self.processes, self.url, self.workdir, name, settings=ALLOW_PRIVATE
            )
            return [(server.process, server.log_path)]
        environment = {**server_environment(self.url, self.workdir), **ALLOW_PRIVATE}
        started = []
        for number in range(count):
            log_path = self.workdir / f"worker-{self.backend}-{number}.log"
            process = self.processes.start(mapapi_command() + ["worker"], environment, log_path)
            started.append((process, log_path))
        return started

    def stop(self, process: subprocess.Popen) -> None:
        stop_process(process)
        self.processes.running.remove(process)


def measure_deliveries(url, seeded: Seeded, events: int, workdir: Path, processes: Processes,
                       backend: str) -> list[Delivery]:  # fmt: skip
    place = _Place(url, workdir, processes, backend)
    not_delivering = {**ALLOW_PRIVATE, "MAPAPI_WEBHOOKS_DELIVER": "0"}
    api = start_app_server(
        processes, url, workdir, f"{backend}-webhooks", settings=not_delivering
    )
    receiver, counter = Receiver(), EventCounter(url)
    receiver.start()
    headers = auth_headers(seeded)
    try:
        results = []
        for number, (label, command, count) in enumerate(DELIVERERS):
            endpoint = {
                "url": receiver.url,
                "events": ["location.created"],
                "mapId": seeded.writes.id,
                "description": f"benchmark: {label}",
            }
            webhook = call(api.base_url, "POST", "/webhooks", headers, json.dumps(endpoint))
            receiver.expect({"/hook": webhook["secret"]})
            made = make_events(api.base_url, headers, seeded, counter, events, f"hooks{number}")
            results.append(deliver(place, (label, command, count), made, receiver))
            call(api.base_url, "DELETE", f"/webhooks/{webhook['id']}", headers)
            progress(
                f"  [{backend}] webhooks by {label}: {results[-1].per_second:.0f} deliveries/s, "
                f"{results[-1].received}/{made} received"
            )
        return results
    finally:
        place.stop(api.process)
        receiver.close()
        counter.close()


def make_events(base_url, headers, seeded, counter: EventCounter, wanted: int, stamp) -> int:
    """Bulk creates (in the writes map) that record ``wanted`` events, rounded up to 100s."""
    bulk, items = MODES[0], owner_items(seeded.writes, 0)
    path = bulk.path(seeded).removeprefix(API)
    mark = counter.mark()
    for number in range(-(-wanted // BULK_SIZE)):
        call(base_url, "POST", path, headers, bulk.body(items, stamp, "t0", number))
    return counter.since(mark)


def deliver(place: _Place, deliverer: tuple, made: int, receiver: Receiver) -> Delivery:
    """Start the deliverers, wait until the receiver has ``made`` deliveries
    (or the time-out), stop them."""
    label, command, count = deliverer
    started = time.monotonic()
    delivering = place.start(command, count)
    try:
        deadline = started + PATIENCE[0] + PATIENCE[1] * made
        while not receiver.arrivals and time.monotonic() < deadline:
            time.sleep(0.01)
        cpu_before = sum(process_cpu_seconds(process.pid) for process, _ in delivering)
        own_before = time.process_time()
        while receiver.received() < made and time.monotonic() < deadline:
            time.sleep(0.01)
        cpu = sum(process_cpu_seconds(process.pid) for process, _ in delivering) - cpu_before
        own = time.process_time() - own_before
        for process, log_path in delivering:
            if process.poll() is not None:
                raise SystemExit(f"{label} exited ({process.returncode}):\n{tail(log_path)}")
    finally:
        for process, _ in delivering:
            place.stop(process)
    arrivals = sorted(receiver.arrivals.values())
    seconds = arrivals[-1] - arrivals[0] if arrivals else 0.0
    return Delivery(
        deliverer=label,
        events=made,
        received=len(arrivals),
        seconds=seconds,
        all_after=(arrivals[-1] - started) if arrivals else 0.0,
        cpu_ms=1000 * cpu / max(len(arrivals), 1),
        receiver_cpu=100 * own / seconds if seconds else 0.0,
        duplicates=receiver.duplicates,
        refused=receiver.refused,
    )


def call(base_url: str, method: str, path: str, headers: dict, body: str | None = None) -> dict:
    """One API request (``body``: JSON text); its ``data``. Anything but a
    2xx stops the benchmark."""
    request = urllib.request.Request(  # noqa: S310 - http://127.0.0.1 only
        base_url + API + path, method=method, headers=headers,
        data=body.encode() if body is not None else None,
    )  # fmt: skip
    try:
        with DIRECT.open(request, timeout=60) as response:
            answer = response.read()
    except urllib.error.HTTPError as error:
        raise SystemExit(f"{method} {path} answered {error.code}: {error.read()[:500]!r}") from None
    return json.loads(answer)["data"] if answer else {}
