#!/usr/bin/env python3
"""Webhook delivery by one worker, of two versions: deliveries/s, a victim's latency under attack.

``python benchmarks/webhooks.py [--baseline main]`` extracts the baseline
revision into a venv of its own (as ``run.py --baseline`` does), then for
SQLite, and PostgreSQL when ``MAPAPI_DATABASE_URL`` names a server, runs
the measurements of harness/fair_deliveries.py on each version in turn:
deliveries per second to one endpoint and to ten, then the latency of a
victim's 20 events while another account attacks (endpoints that never
answer, names whose lookup hangs, a flood of events). Prints one table.

Every process it starts is stopped on the way out, Ctrl-C and errors included.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from harness.baseline import build_baseline, current_version
from harness.fair_deliveries import SPREAD, Results, measure_version
from harness.report import load_average
from harness.servers import Processes
from harness.settings import progress


def parse_options(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--baseline", metavar="REV", default="main", help="the revision to compare with (main)"
    )
    parser.add_argument(
        "--events",
        type=int,
        default=2000,
        help="deliveries of each throughput backlog, rounded up to 100s per endpoint (2000)",
    )
    parser.add_argument(
        "--sqlite-only",
        action="store_true",
        help="skip PostgreSQL even when MAPAPI_DATABASE_URL names one",
    )
    return parser.parse_args(argv)


def backends(options) -> list[str]:
    url = os.environ.get("MAPAPI_DATABASE_URL", "")
    postgres = url.startswith("postgresql") and not options.sqlite_only
    return ["sqlite", "postgresql"] if postgres else ["sqlite"]


def print_table(results: list[Results], load_before: str, seconds: float) -> None:
    print()
    print(
        f"webhook delivery, one `mapapi worker` per version (load average {load_before} "
        f"before, {load_average()} after; {seconds / 60:.1f} min)"
    )
    print()
    print(
        "| db | version | deliveries/s, 1 endpoint | deliveries/s, "
        f"{SPREAD} endpoints | victim's 20 events under attack: arrived, median, max |"
    )
    print("|---|---|---:|---:|---|")
    for result in results:
        one, spread = result.throughput
        print(
            f"| {result.backend} | {result.version.description} | {one.per_second:,.0f} | "
            f"{spread.per_second:,.0f} | {result.attack.summary()} |"
        )
    unexpected = [
        f"{r.backend} {r.version.name} {t.endpoints} endpoint(s): {t.received}/{t.deliveries} "
        f"received, {t.duplicates} duplicates, {t.refused} refused"
        for r in results
        for t in r.throughput
        if t.received != t.deliveries or t.duplicates or t.refused
    ]
    for line in unexpected:
        print(f"unexpected: {line}")


def main(argv=None) -> int:
    options = parse_options(argv)
    started, load_before = time.monotonic(), load_average()
    # SIGTERM unwinds like Ctrl-C does, through every finally that stops a process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    processes = Processes()
    results = []
    with tempfile.TemporaryDirectory(prefix="mapapi-webhooks-") as directory:
        workdir = Path(directory)
        os.environ["MAPAPI_INSTANCE_PATH"] = str(workdir)
        try:
            versions = [build_baseline(options.baseline, workdir), current_version()]
            for backend in backends(options):
                for version in versions:
                    progress(f"{backend}: {version.name} ({version.description})")
                    results.append(
                        measure_version(version, backend, options.events, workdir, processes)
                    )
        except KeyboardInterrupt:
            progress("interrupted: stopping the processes")
            return 130
        finally:
            processes.stop_all()
    print_table(results, load_before, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
