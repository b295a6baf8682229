"""``mapapi sync`` at the size users have: a 100,000-row CSV kept in step with a map.

Three phases on each database, each against a freshly started ``mapapi
serve`` with its default settings (so no phase inherits another's rate-limit
buckets; in-memory limits start empty): the first load into an empty map,
an unchanged rerun, and a rerun with 1% of the rows changed. For each: the
command's wall time, the requests it made (the server's access log) and any
429 among them, and the client's peak memory (its maximum resident set, from
``wait4``). After each phase the map is read back and compared with the file.

    python benchmarks/file_sync.py                  # SQLite
    MAPAPI_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1/postgres \\
        python benchmarks/file_sync.py              # SQLite, then PostgreSQL
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.data import database_for  # noqa: E402
from harness.servers import (  # noqa: E402
    DIRECT,
    Processes,
    free_port,
    mapapi_command,
    stop_process,
    wait_until_serving,
)

ROWS = 100_000
CHANGED_SHARE = 0.01
TARGETS = {"first load": 180.0, "unchanged": 20.0}
MEMORY_TARGET_MB = 300


def write_file(path: Path, rows: int, seed: int = 11, changed: set[int] = frozenset()) -> None:
    """A CRM export: the id, the name, coordinates, an address and two columns of its own."""
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(["externalId", "name", "lat", "lng", "address", "segment", "owner"])
        for number in range(rows):
            name = f"Customer {number}" + (" (renamed)" if number in changed else "")
            writer.writerow([
                f"CRM-{number:06d}", name, f"{rng.uniform(-80, 80):.6f}",
                f"{rng.uniform(-170, 170):.6f}", f"{rng.randint(1, 999)} Main Street, Springfield",
                rng.choice(["retail", "wholesale", "online"]), f"rep{rng.randint(1, 40)}",
            ])  # fmt: skip


class Served:
    """``mapapi serve`` on ``database_url`` with the default settings."""

    def __init__(self, processes: Processes, database_url: str, workdir: Path, name: str):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"{name}.log"
        self.key_file = workdir / "key.txt"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MAPAPI_")}
        env.update(
            MAPAPI_DATABASE_URL=database_url,
            MAPAPI_INSTANCE_PATH=str(workdir / "instance"),
            MAPAPI_WEBHOOKS_DELIVER="0",
        )
        command = [*mapapi_command(), "serve", "--port", str(self.port)]
        self.process = processes.start(command, env, self.log)
        wait_until_serving(self.process, f"{self.base}/healthz", self.log)
        if not self.key_file.exists():  # the first start prints the first key
            deadline = time.monotonic() + 30
            while not _key_line(self.log) and time.monotonic() < deadline:
                time.sleep(0.2)
            self.key_file.write_text(_key_line(self.log))
        self.key = self.key_file.read_text().strip()

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(  # noqa: S310 - http://127.0.0.1 only
            f"{self.base}/api/v1{path}", data=json.dumps(body).encode(), method="POST",
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )  # fmt: skip
        with DIRECT.open(request, timeout=30) as answer:
            return json.load(answer)["data"]

    def export(self, map_id: str) -> list[dict]:
        request = urllib.request.Request(  # noqa: S310 - http://127.0.0.1 only
            f"{self.base}/api/v1/maps/{map_id}/locations.geojson",
            headers={"Authorization": f"Bearer {self.key}"},
        )
        with DIRECT.open(request, timeout=300) as answer:
            return json.load(answer)["features"]

    def requests(self) -> list[dict]:
        lines = self.log.read_text(errors="replace").splitlines()
        found = [json.loads(line.split("mapapi.access: ", 1)[1]) for line in lines
                 if "mapapi.access: " in line]  # fmt: skip
        return [line for line in found if line["path"].startswith("/api/v1")]


def _key_line(log: Path) -> str:
    lines = [
        line for line in log.read_text(errors="replace").splitlines() if line.startswith("mk_")
    ]
    return lines[0] if lines else ""


def measured_sync(served: Served, path: Path, map_id: str) -> dict:
    """One ``mapapi sync``: its wall time, its peak memory, its last line.

    The peak is the child's ``VmHWM`` (the high-water mark of its resident
    set, which ``exec`` starts afresh), read every 0.1 s while it runs: the
    ``ru_maxrss`` of ``wait4`` would count the memory of this process,
    which the child is forked from, too.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAPAPI_")}
    env.update(MAPAPI_KEY=served.key, MAPAPI_URL=served.base)
    started, peak_kb = time.monotonic(), 0
    with open(path.with_suffix(".out"), "w") as out, open(path.with_suffix(".err"), "w") as err:
        process = subprocess.Popen(
            [*mapapi_command(), "sync", str(path), "--map", map_id], env=env, stdout=out, stderr=err
        )
        while process.poll() is None:
            peak_kb = max(peak_kb, _high_water_kb(process.pid))
            time.sleep(0.1)
    seconds = time.monotonic() - started
    if process.returncode != 0:
        raise SystemExit(f"mapapi sync failed: {path.with_suffix('.err').read_text()[-2000:]}")
    last = path.with_suffix(".out").read_text().strip().splitlines()[-1]
    return {"seconds": seconds, "peak_mb": peak_kb / 1024, "summary": last}


def _high_water_kb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # it has just ended
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def check_map(served: Served, map_id: str, rows: int, changed: set[int]) -> None:
    """The map holds the file: every row once, the changed ones renamed."""
    features = served.export(map_id)
    names = {f["properties"]["externalId"]: f["properties"]["name"] for f in features}
    if len(features) != rows or len(names) != rows:
        raise SystemExit(f"the map has {len(features)} locations, the file {rows} rows")
    for number in (0, rows // 2, rows - 1, *sorted(changed)[:20]):
        expected = f"Customer {number}" + (" (renamed)" if number in changed else "")
        if names[f"CRM-{number:06d}"] != expected:
            raise SystemExit(f"row {number}: the map has {names[f'CRM-{number:06d}']!r}")


def benchmark(backend: str, rows: int, workdir: Path, processes: Processes) -> list[dict]:
    results = []
    changed = set(random.Random(3).sample(range(rows), int(rows * CHANGED_SHARE)))
    with database_for(backend, workdir) as url:
        path = workdir / "crm.csv"
        write_file(path, rows)
        map_id = None
        for phase, edits in (("first load", set()), ("unchanged", set()), ("1% changed", changed)):
            if edits:
                write_file(path, rows, changed=edits)
            served = Served(processes, url, workdir, phase.replace(" ", "-").replace("%", ""))
            try:
                map_id = map_id or served.post("/maps", {"title": "CRM"})["id"]
                before = len(served.requests())
                result = measured_sync(served, path, map_id)
                time.sleep(2)  # the access log is written in batches
                sent = served.requests()[before:]
                check_map(served, map_id, rows, edits)
            finally:
                stop_process(served.process)
            result.update(
                backend=backend, phase=phase, rows=rows,
                requests=len([r for r in sent if r["path"].startswith(f"/api/v1/maps/{map_id}")]),
                refused_429=sum(1 for r in sent if r["status"] == 429),
            )  # fmt: skip
            print(
                f"{backend:<10} {phase:<11} {result['seconds']:7.1f} s  "
                f"{result['requests']:4d} requests  {result['refused_429']} x 429  "
                f"client peak {result['peak_mb']:6.1f} MB   {result['summary']}",
                flush=True,
            )
            results.append(result)
    return results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    options = parser.parse_args(argv)
    backends = ["sqlite"]
    if os.environ.get("MAPAPI_DATABASE_URL", "").startswith("postgresql"):
        backends.append("postgresql")
    processes, results = Processes(), []
    try:
        for backend in backends:
            with tempfile.TemporaryDirectory(prefix=f"filesync-{backend}-") as folder:
                results += benchmark(backend, options.rows, Path(folder), processes)
    finally:
        processes.stop_all()
    for result in results:
        target = TARGETS.get(result["phase"])
        met = (
            []
            if target is None
            else [f"{'met' if result['seconds'] < target else 'MISSED'} < {target:.0f} s"]
        )
        met.append(
            f"{'met' if result['peak_mb'] < MEMORY_TARGET_MB else 'MISSED'} < {MEMORY_TARGET_MB} MB"
        )
        if result["phase"] == "first load":
            met.append("no 429" if result["refused_429"] == 0 else "MISSED: 429s")
        print(f"{result['backend']:<10} {result['phase']:<11} targets: {', '.join(met)}")
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
