"""Webhook deliveries with one ``mapapi worker``, of two versions of mapapi
(issue 31): deliveries per second, and a victim's delivery latency while
another account attacks.

Each version (``--baseline REV``'s and the current one) gets a fresh
database made by its own ``mapapi``, three accounts and an API server that
does not deliver; then, each time with a ``mapapi worker`` of the version
started afresh:

1. **deliveries/s**: a backlog of ``--events`` deliveries to one endpoint,
   then the same number spread over ten endpoints (a version that allows at
   most two attempts in flight per endpoint serves one endpoint two at a
   time); deliveries/s is their number over the time from the first
   arrival to the last, as in deliveries.py. ``--runs`` times, the two
   versions taking turns, so that each comparison is made seconds apart;
2. **under attack**: one account has ten endpoints on a socket of
   127.0.0.1 that accepts and never answers, another ten whose names'
   lookups never end (names under ``.hang.test``, made to hang in the
   worker by ``tests/hanging_dns/sitecustomize.py`` on its ``PYTHONPATH``,
   as a nameserver that never answers would), and they make 600 events before the worker
   starts and 400 more while a third account, the victim, makes 20 events
   0.25 s apart; each victim event's latency is the time from its
   ``POST`` answering to its arrival at the victim's receiver (given up
   after ``ATTACK_PATIENCE`` seconds).

``MAPAPI_WEBHOOKS_ALLOW_PRIVATE=1`` lets the endpoints point at 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .baseline import Version, run_mapapi
from .data import database_for
from .deliveries import call
from .servers import Processes, server_environment, start_app_server, stop_process, stop_server
from .settings import BULK_SIZE, HERE, progress
from .webhook_receiver import Receiver

ALLOW_PRIVATE = {"MAPAPI_WEBHOOKS_ALLOW_PRIVATE": "1"}
ACCOUNTS = ("victim", "silent", "hanging")
#: Endpoints over which the second backlog is spread.
SPREAD = 10
#: The attackers' events before the worker starts, and during the victim's.
ATTACK_BULKS, ATTACK_BULKS_DURING = 3, 1
VICTIM_EVENTS = 20
VICTIM_PAUSE = 0.25
#: Seconds a victim's event may take before it counts as not delivered.
ATTACK_PATIENCE = 60.0
#: Its ``sitecustomize.py`` makes lookups of names under ``.hang.test`` hang
#: in a process that has the folder on its ``PYTHONPATH`` (the tests use it too).
HANGING_DNS = HERE.parent / "tests" / "hanging_dns"


@dataclass
class Throughput:
    endpoints: int
    deliveries: int
    received: int
    seconds: float
    duplicates: int
    refused: int

    @property
    def per_second(self) -> float:
        return self.received / self.seconds if self.seconds else 0.0


@dataclass
class UnderAttack:
    #: Seconds from each victim event's making to its arrival; None: never arrived.
    latencies: list[float | None] = field(default_factory=list)

    @property
    def arrived(self) -> list[float]:
        return sorted(latency for latency in self.latencies if latency is not None)

    def summary(self) -> str:
        arrived = self.arrived
        if not arrived:
            return f"0 of {len(self.latencies)} within {ATTACK_PATIENCE:.0f} s"
        return (
            f"{len(arrived)} of {len(self.latencies)}, median {statistics.median(arrived):.2f} s, "
            f"max {arrived[-1]:.2f} s"
        )


@dataclass
class Results:
    version: Version
    backend: str
    #: Each run's measurements, by the number of endpoints.
    throughput: dict[int, list[Throughput]]
    attack: UnderAttack

    def median_per_second(self, endpoints: int) -> float:
        return statistics.median(run.per_second for run in self.throughput[endpoints])


@dataclass
class _Place:
    """One version on its fresh database: its API server and the accounts' keys."""

    version: Version
    folder: Path
    environment: dict
    base_url: str
    keys: dict[str, str]
    processes: Processes

    def headers(self, account: str) -> dict:
        return {"Authorization": f"Bearer {self.keys[account]}", "Content-Type": "application/json"}

    def call(self, account: str, method: str, path: str, body: dict | None = None) -> dict:
        text = json.dumps(body) if body is not None else None
        return call(self.base_url, method, path, self.headers(account), text)

    def new_map(self, account: str) -> str:
        return self.call(account, "POST", "/maps", {"title": "webhooks"})["id"]

    def bulk(self, account: str, map_id: str, count: int = BULK_SIZE) -> None:
        spots = [{"name": f"s{n}", "lat": 0, "lng": 0} for n in range(count)]
        self.call(account, "POST", f"/maps/{map_id}/locations/bulk", {"locations": spots})

    def endpoint(self, account: str, url: str, map_id: str) -> dict:
        body = {"url": url, "events": ["location.created"], "mapId": map_id}
        return self.call(account, "POST", "/webhooks", body)

    def start_worker(self, name: str) -> tuple:
        log_path = self.folder / f"worker-{name}.log"
        environment = {**self.environment, "PYTHONPATH": str(HANGING_DNS)}
        command = self.version.mapapi + ["worker"]
        return self.processes.start(command, environment, log_path), log_path


@contextlib.contextmanager
def _place(version: Version, backend: str, workdir: Path, processes: Processes):
    folder = workdir / f"fair-{backend}-{version.name}"
    folder.mkdir()
    with database_for(backend, folder) as url:
        environment = {**server_environment(url, folder), **ALLOW_PRIVATE}
        run_mapapi(version, ["db", "upgrade"], environment, folder)
        keys = {}
        for account in ACCOUNTS:
            email = f"{account}@example.com"
            run_mapapi(version, ["accounts", "create", email], environment, folder)
            key = ["keys", "create", email, "--name", "benchmark"]
            keys[account] = run_mapapi(version, key, environment, folder).split()[-1]
        settings = {**ALLOW_PRIVATE, "MAPAPI_WEBHOOKS_DELIVER": "0"}
        api = start_app_server(
            processes, url, folder, f"{version.name}-api", mapapi=version.mapapi, settings=settings
        )
        try:
            yield _Place(version, folder, environment, api.base_url, keys, processes)
        finally:
            stop_server(processes, api)


def measure_backend(
    versions: list[Version], backend: str, events: int, runs: int, workdir: Path,
    processes: Processes,
) -> list[Results]:  # fmt: skip
    """Each version on a database of its own; the throughput measured ``runs``
    times, the versions taking turns (the first one first in odd runs), then
    each version's victim under attack."""
    with contextlib.ExitStack() as stack:
        places = [
            stack.enter_context(_place(version, backend, workdir, processes))
            for version in versions
        ]
        receiver = Receiver()
        receiver.start()
        stack.callback(receiver.close)
        measured = {place.version.name: {1: [], SPREAD: []} for place in places}
        for run in range(runs):
            for endpoints in (1, SPREAD):
                for place in places if run % 2 == 0 else places[::-1]:
                    measured[place.version.name][endpoints].append(
                        _throughput(place, receiver, endpoints, events)
                    )
        return [
            Results(
                place.version, backend, measured[place.version.name],
                _under_attack(place, receiver),
            )  # fmt: skip
            for place in places
        ]


def _throughput(place: _Place, receiver: Receiver, endpoints: int, deliveries: int) -> Throughput:
    """A backlog of ``deliveries`` (rounded up to whole bulks per endpoint) to
    ``endpoints`` endpoints, then one worker; deliveries/s first arrival to last."""
    map_id = place.new_map("victim")
    secrets, ids = {}, []
    for number in range(endpoints):
        path = f"/throughput-{endpoints}-{number}"
        made = place.endpoint("victim", receiver.url_for(path), map_id)
        secrets[path] = made["secret"]
        ids.append(made["id"])
    receiver.expect(secrets)
    per_endpoint = -(-deliveries // endpoints // BULK_SIZE) * BULK_SIZE
    for _ in range(per_endpoint // BULK_SIZE):
        place.bulk("victim", map_id)
    expected = per_endpoint * endpoints
    label = f"{place.version.name}: {expected} deliveries to {endpoints} endpoint(s)"
    progress(f"  {label}")
    worker, log_path = place.start_worker(f"throughput-{endpoints}")
    try:
        deadline = time.monotonic() + 60 + 0.05 * expected
        while receiver.received() < expected and time.monotonic() < deadline:
            if worker.poll() is not None:
                raise SystemExit(f"{label}: the worker exited:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.01)
    finally:
        stop_process(worker)
        place.processes.running.remove(worker)
    for webhook_id in ids:  # an account has at most 10
        place.call("victim", "DELETE", f"/webhooks/{webhook_id}")
    arrivals = sorted(receiver.arrivals.values())
    return Throughput(
        endpoints, expected, len(arrivals),
        arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0,
        receiver.duplicates, receiver.refused,
    )  # fmt: skip


class _SilentSocket:
    """Accepts connections on 127.0.0.1 and holds them, never answering."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url_for(self, path: str) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}{path}"

    def _accept(self) -> None:
        while True:
            try:
                self.held.append(self.listener.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()
        for held in self.held:
            held.close()


def _under_attack(place: _Place, receiver: Receiver) -> UnderAttack:
    silent = _SilentSocket()
    maps = {account: place.new_map(account) for account in ACCOUNTS}
    for number in range(10):
        place.endpoint("silent", silent.url_for(f"/silent-{number}"), maps["silent"])
        hanging = f"http://hook-{number}.hang.test:9/in"
        place.endpoint("hanging", hanging, maps["hanging"])
    victim = place.endpoint("victim", receiver.url_for("/victim"), maps["victim"])
    receiver.expect({"/victim": victim["secret"]})

    def attack(bulks: int) -> None:
        for account in ("silent", "hanging"):
            for _ in range(bulks):
                place.bulk(account, maps[account])

    attack(ATTACK_BULKS)
    progress(f"  {place.version.name}: the victim's {VICTIM_EVENTS} events under attack")
    worker, _log_path = place.start_worker("attack")
    made: dict[str, float] = {}
    try:
        time.sleep(3)  # the attack takes hold of what it can
        for number in range(VICTIM_EVENTS):
            spot = {"name": f"v{number}", "lat": 1, "lng": 2}
            place.call("victim", "POST", f"/maps/{maps['victim']}/locations", spot)
            at = time.monotonic()
            made[place.call("victim", "GET", "/events?after=latest")["next"]] = at
            if number % (VICTIM_EVENTS // 2) == 0:
                attack(ATTACK_BULKS_DURING)
            time.sleep(VICTIM_PAUSE)
        deadline = max(made.values()) + ATTACK_PATIENCE
        while receiver.received() < len(made) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        silent.close()
        stop_process(worker)
        place.processes.running.remove(worker)
    arrived = {event_id: at for (_path, event_id), at in receiver.arrivals.items()}
    return UnderAttack(
        [arrived[event_id] - at if event_id in arrived else None for event_id, at in made.items()]
    )
