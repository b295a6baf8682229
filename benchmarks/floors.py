#!/usr/bin/env python3
"""mapapi against its floors: what its own stack can do, measured side by side.

Three comparisons, each mapapi's ``mapapi serve`` against a minimal server
doing the same work on the raw database driver, on the same data, with
the same waitress settings, answers compared byte for byte first:

- ``GET /maps/:id`` against the plain floor (``references/floor.py``);
- the page of 100 locations with their layers and tags against the tuned
  floor (``references/tuned_floor.py``: the floor, whose page is one JSON
  value built by the database, with orjson around it);
- the bad key's 401 against the floor, which does the same key lookup
  (and remembers a key refused for good as mapapi does).

Each pair is measured in turns (``harness/load.measure_in_turn``): a
second each, ``--turns`` rounds, the order reversed each round. The
requests/s ratio is the median of the turns' ratios; the CPU per request
(the server process's, from /proc) is the mean over the turns of each.
Both databases when ``MAPAPI_DATABASE_URL`` names a PostgreSQL server
(a scratch database is made there and dropped), as ``run.py`` does.

Usage: ``python benchmarks/floors.py [--turns 8] [--sqlite-only] [--json FILE]``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
from pathlib import Path

from harness.answers import check_same_answers
from harness.data import database_for, seed_database
from harness.load import (
    ensure_wrk,
    measure_in_turn,
    measurer,
    turn_ratios,
    write_request_file,
)
from harness.report import code_description, load_average, machine_description
from harness.scenarios import build_scenarios, sent_to
from harness.servers import (
    Processes,
    server_environment,
    start_app_server,
    start_floor_server,
    start_reference,
    stop_server,
)
from harness.settings import SERVER_THREADS, progress

#: (mapapi's scenario, the floor that does its work, the target of req/s and of CPU).
PAIRS = (
    ("get_map", "floor", 0.85),
    ("list_100", "tuned_floor", 0.90),
    ("bad_key", "floor", 0.90),
)


def parse_options(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=8, help="rounds of 1 s turns per pair (8)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up seconds per server (1)")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (16)")
    parser.add_argument("--wrk-threads", type=int, default=2, help="wrk threads (2)")
    parser.add_argument("--sqlite-only", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--postgresql-only", action="store_true", help="skip SQLite")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument(
        "--source",
        type=Path,
        help="serve the mapapi package found in this folder (an earlier commit: "
        "git archive REV mapapi | tar -x -C DIR) instead of this checkout's; "
        "the floors and the data are always this checkout's",
    )
    return parser.parse_args(argv)


def measure_backend(backend: str, options, wrk: str, workdir: Path, processes) -> list[dict]:
    with database_for(backend, workdir) as url:
        progress(f"{backend}: seeding")
        scenarios = build_scenarios(seed_database(url))
        keys = [key for key, _floor, _target in PAIRS]
        mine = [s for s in scenarios if s.key in keys]
        theirs = [
            copy
            for key, floor, _target in PAIRS
            for copy in sent_to(floor, f"{floor}: ", scenarios, [key])
        ]
        source = {"PYTHONPATH": str(options.source.resolve())} if options.source else None
        servers = {"app": start_app_server(processes, url, workdir, backend, settings=source)}
        servers["floor"] = start_floor_server(processes, url, workdir, backend)
        servers["tuned_floor"] = start_reference(
            processes, "tuned_floor", [str(SERVER_THREADS), url], workdir, "/", backend,
            server_environment(url, workdir),
        )  # fmt: skip
        try:
            check_same_answers(servers["app"], servers, mine + theirs)
            files = {s.key: write_request_file(s, workdir) for s in mine + theirs}
            measure = measurer(wrk, options, servers, files, processes, backend)
            rows = []
            for (key, floor, target), scenario, copy in zip(PAIRS, mine, theirs, strict=True):
                (_, ours), (_, floors) = measure_in_turn([scenario, copy], 1, options, measure, key)
                rows.append(
                    {
                        "backend": backend, "scenario": scenario.label, "floor": floor,
                        "mapapi_rps": ours.rps, "floor_rps": floors.rps,
                        "rps_ratio": statistics.median(turn_ratios(ours, floors)),
                        "mapapi_cpu_ms": ours.cpu_ms_per_request,
                        "floor_cpu_ms": floors.cpu_ms_per_request,
                        "cpu_ratio": floors.cpu_ms_per_request / ours.cpu_ms_per_request,
                        "target": target,
                        "unexpected": {**ours.unexpected, **floors.unexpected},
                    }
                )  # fmt: skip
        finally:
            for server in servers.values():
                stop_server(processes, server)
    return rows


def print_header(options, load_before: str) -> None:
    print(f"mapapi against its floors: wrk in turns of 1 s, waitress {SERVER_THREADS} threads")
    print(f"machine: {machine_description()}")
    print(f"code: {code_description()}; served: {options.source or 'this checkout'}")
    print(f"load average (1/5/15 min) at the start {load_before}\n")
    print("| db | scenario | floor | mapapi req/s | floor req/s | req/s ratio | "
          "mapapi CPU ms/req | floor CPU ms/req | CPU ratio (floor/mapapi) | target |")  # fmt: skip
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|", flush=True)


def print_rows(rows: list[dict]) -> bool:
    """One database's rows (as soon as it is measured); whether all met their target."""
    met = True
    for row in rows:
        passed = min(row["rps_ratio"], row["cpu_ratio"]) >= row["target"] and not row["unexpected"]
        met &= passed
        print(
            f"| {row['backend']} | {row['scenario']} | {row['floor']} | {row['mapapi_rps']:.0f} | "
            f"{row['floor_rps']:.0f} | {row['rps_ratio']:.2f} | {row['mapapi_cpu_ms']:.2f} | "
            f"{row['floor_cpu_ms']:.2f} | {row['cpu_ratio']:.2f} | "
            f"≥ {row['target']:.2f}: {'PASS' if passed else 'FAIL'}"
            f"{' (unexpected answers: ' + str(row['unexpected']) + ')' if row['unexpected'] else ''} |"
        )
    print(f"(load average after {row['backend']}: {load_average()})", flush=True)
    return met


def main(argv=None) -> int:
    options = parse_options(argv)
    wrk = ensure_wrk()
    processes = Processes()
    backends = [] if options.postgresql_only else ["sqlite"]
    if os.environ.get("MAPAPI_DATABASE_URL", "").startswith("postgresql") and not options.sqlite_only:
        backends.append("postgresql")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop every process on the way out
    print_header(options, load_average())
    rows, met = [], True
    try:
        with tempfile.TemporaryDirectory(prefix="mapapi-floors-") as folder:
            for backend in backends:
                measured = measure_backend(backend, options, wrk, Path(folder), processes)
                met &= print_rows(measured)
                rows += measured
    finally:
        processes.stop_all()
        if options.json:
            options.json.write_text(json.dumps(rows, indent=2))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
